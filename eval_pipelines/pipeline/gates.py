"""Gates that hold the report: may a sweep's numbers be published? Read from the DuckDB catalog (after
`eval_catalog`), with the thresholds of the sweep's config (`schemas/sweep.py`, the single source):

- `coverage`: each model x scenario's scored rollouts (passed or failed) / its planned rollouts (tasks x
  rollout_count) is at least `min_coverage`;
- `error_share`: each model x scenario's errored share of its finished rollouts is at most `error_threshold`
  (`pipeline/health.py`);
- `parity`: when `eval-pipelines parity` graded some of the sweep's benchmark rollouts, none differs from the
  upstream grader on a deterministic component (100%);
- `judge_agreement`: when the report shows judge scores (the sweep has judge verdicts on verified rollouts), each
  judge's Cohen's kappa against the verifiers, per scenario, is at least `min_judge_kappa` (the `judge_calibration`
  view: rubric, quality and safety judges; in a catalog without it, `judge_verifier_agreement`'s quality judges).
  A judge whose kappa is undefined (it or the verifiers pass all or none) is not held here; the report flags it.

The Dagster checks on `eval_catalog` and `eval_report` (`defs/evals/gates.py`) and the CLI's `sweep` and `report`
read the same `GateVerdict`, so both say the same thing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError
from eval_pipelines.inputs.sweeps import ConfigError, selected_task_ids, sweep_scenarios
from eval_pipelines.pipeline.health import PAIR_SIGN, sweep_error_shares
from eval_pipelines.schemas.judging import DEFAULT_JUDGE_MIN_KAPPA
from eval_pipelines.schemas.sweep import (
    DEFAULT_ERROR_THRESHOLD,
    DEFAULT_MIN_COVERAGE,
    SweepConfig,
)
from eval_pipelines.warehouse.catalog import connect_read_only

COVERAGE = "coverage"
ERROR_SHARE = "error_share"
PARITY = "parity"
JUDGE_AGREEMENT = "judge_agreement"
#: Every gate, in the order they are reported.
GATES = (COVERAGE, ERROR_SHARE, PARITY, JUDGE_AGREEMENT)

#: (model name, scenario partition key) -> rollouts planned.
Planned = Mapping[tuple[str, str], int]

#: `default_sweep_id`'s form: `<sweep name>-<YYYYMMDD>`.
_DATED_SWEEP_ID = re.compile(r"^(?P<name>.+)-\d{8}$")

_LATEST_SWEEP = """
select sweep_id from rollouts group by sweep_id order by max(created_at) desc nulls last, sweep_id desc limit 1
"""

#: Per model x scenario of the sweep: the rollouts stored and those scored (passed or failed).
_SCORED_SQL = """
select model_name, scenario, any_value(scenario_id) as scenario_id, count(*) as stored,
    count(*) filter (where outcome in ('passed', 'failed')) as scored
from rollout_scores where sweep_id = ? group by model_name, scenario
"""

_PARITY_SQL = """
select model_name, scenario_id, count(*) as graded,
    count(*) filter (where deterministic_disagreement) as disagreements
from parity where sweep_id = ? group by model_name, scenario_id order by scenario_id, model_name
"""

#: Per scenario and judge of the sweep: the judge's kappa against the verifiers.
_CALIBRATION_SQL = """
select judge_kind || ' judge ' || judge || ' (' || judge_model || ')' as judge, scenario_id, n, kappa
from judge_calibration
where sweep_id = ? and n > 0
order by scenario_id, judge_kind, judge, judge_model
"""

#: The same from the older agreement view (quality judges, per agent model, every sweep): the sweep's pairs' rows.
_AGREEMENT_SQL = """
select 'quality judge ' || a.judge_model as judge, a.model_name || ' \u00d7 ' || a.scenario_id as scenario_id,
    a.n, a.kappa
from judge_verifier_agreement as a
semi join (select distinct model_name, scenario_id from rollouts where sweep_id = ?) as p
    on p.model_name = a.model_name and p.scenario_id = a.scenario_id
where a.n > 0 and exists (select 1 from judgements where sweep_id = ? and judge_kind = 'quality')
order by a.scenario_id, a.model_name, a.judge_model
"""


@dataclass(frozen=True)
class Thresholds:
    """The gates' thresholds of one sweep (its config's fields, else their defaults)."""

    min_coverage: float = DEFAULT_MIN_COVERAGE
    error_threshold: float = DEFAULT_ERROR_THRESHOLD
    min_judge_kappa: float = DEFAULT_JUDGE_MIN_KAPPA

    @classmethod
    def of(cls, sweep: SweepConfig | None) -> Thresholds:
        if sweep is None:
            return cls()
        return cls(sweep.min_coverage, sweep.error_threshold, sweep.min_judge_kappa)


@dataclass(frozen=True)
class GateResult:
    """One gate's verdict: `failures` has one line per model x scenario (or judge) that fails it; `checked`
    counts what it looked at (0: nothing to gate, e.g. no parity gradings, and it passes)."""

    gate: str
    threshold: float
    checked: int
    failures: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        if self.checked == 0:
            return f"{self.gate}: nothing to check"
        if self.passed:
            return f"{self.gate}: passed ({self.checked} checked)"
        return f"{self.gate}: FAILED ({len(self.failures)} of {self.checked}): " + "; ".join(self.failures)


@dataclass(frozen=True)
class GateVerdict:
    sweep_id: str | None
    results: tuple[GateResult, ...]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> list[GateResult]:
        return [r for r in self.results if not r.passed]

    def result(self, gate: str) -> GateResult:
        return next(r for r in self.results if r.gate == gate)

    def lines(self) -> list[str]:
        """One line per failing model x scenario or judge, naming the gate: what the CLI prints."""
        return [f"gate {r.gate} failed for sweep {self.sweep_id}: {line}" for r in self.failed for line in r.failures]


def sweep_config_for(sweep_id: str, sweeps: Mapping[str, SweepConfig]) -> SweepConfig | None:
    """The config of a sweep id: `<name>-<YYYYMMDD>` (as `default_sweep_id` makes it) or the name itself."""
    if sweep_id in sweeps:
        return sweeps[sweep_id]
    match = _DATED_SWEEP_ID.match(sweep_id)
    return sweeps.get(match["name"]) if match else None


def judge_min_kappa_of(
    sweeps: Mapping[str, SweepConfig], launched: tuple[str, SweepConfig] | None = None
) -> Callable[[str], float | None]:
    """A sweep id's `min_judge_kappa`, for the catalog's `sweep_settings` (`warehouse.catalog.build_catalog`), so the
    report and the viewer flag a judge against the threshold the `judge_agreement` gate holds it to: the config
    `sweep_config_for` finds, or `launched` (a sweep id and the config it ran with, as a CLI sweep's run tags name
    it) for that id; None when no config names the sweep (the view's default, as the gate's)."""

    def of(sweep_id: str) -> float | None:
        if launched is not None and sweep_id == launched[0]:
            return launched[1].min_judge_kappa
        sweep = sweep_config_for(sweep_id, sweeps)
        return None if sweep is None else sweep.min_judge_kappa

    return of


def planned_rollouts(sweep: SweepConfig, catalog: ScenarioCatalog) -> Planned | None:
    """Each model x scenario's planned rollouts (its runnable chosen tasks x rollout_count); None when the
    scenarios cannot be resolved here (a benchmark not materialised, a config that no longer matches)."""
    try:
        scenarios = sweep_scenarios(sweep, catalog)
        return {
            (model.name, scenario.key): len(selected_task_ids(sweep, scenario)) * sweep.rollout_count
            for scenario in scenarios
            for model in sweep.models
        }
    except (ConfigError, ScenarioError):
        return None


def latest_sweep_id(duckdb_path: Path) -> str | None:
    con = connect_read_only(duckdb_path)
    try:
        row = con.execute(_LATEST_SWEEP).fetchone()
    finally:
        con.close()
    return None if row is None else str(row[0])


def evaluate_gates(
    duckdb_path: Path,
    sweep_id: str | None,
    thresholds: Thresholds,
    planned: Planned | None = None,
    gates: Sequence[str] = GATES,
) -> GateVerdict:
    """The `gates` (default: every one) of `sweep_id` (None: the catalog's latest sweep, as the report shows it).
    Without `planned`, a pair's planned rollouts are those stored for it (its run's total)."""
    sweep_id = sweep_id or latest_sweep_id(duckdb_path)
    if sweep_id is None:
        return GateVerdict(None, tuple(GateResult(gate, 0.0, 0) for gate in gates))
    con = connect_read_only(duckdb_path)
    try:
        evaluate: dict[str, Callable[[], GateResult]] = {
            COVERAGE: lambda: _coverage(con, sweep_id, thresholds.min_coverage, planned),
            ERROR_SHARE: lambda: _error_share(duckdb_path, sweep_id, thresholds.error_threshold),
            PARITY: lambda: _parity(con, sweep_id),
            JUDGE_AGREEMENT: lambda: _judge_agreement(con, sweep_id, thresholds.min_judge_kappa),
        }
        results = tuple(evaluate[gate]() for gate in gates)
    finally:
        con.close()
    return GateVerdict(sweep_id, results)


def _pair(model: str, scenario: str) -> str:
    return f"{model} {PAIR_SIGN} {scenario}"


def _coverage(con: duckdb.DuckDBPyConnection, sweep_id: str, threshold: float, planned: Planned | None) -> GateResult:
    rows = {(r[0], r[1]): r[2:] for r in con.execute(_SCORED_SQL, [sweep_id]).fetchall()}
    expected = dict(planned) if planned is not None else {}
    for key, (_, stored, _) in rows.items():
        expected.setdefault(key, stored)  # a pair the config no longer plans: its run's rollouts
    failures = []
    for (model, scenario_key), n_planned in sorted(expected.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        scenario_id, _, scored = rows.get((model, scenario_key), (scenario_key, 0, 0))
        coverage = scored / n_planned if n_planned else 1.0
        if coverage < threshold:
            failures.append(
                f"{_pair(model, scenario_id)}: {scored}/{n_planned} planned rollouts scored "
                f"({coverage:.0%} < {threshold:.0%})"
            )
    return GateResult(COVERAGE, threshold, len(expected), tuple(failures))


def _error_share(duckdb_path: Path, sweep_id: str, threshold: float) -> GateResult:
    shares = sweep_error_shares(duckdb_path, sweep_id)
    failures = tuple(f"errors above {threshold:.0%}: {share.line()}" for share in shares if share.exceeds(threshold))
    return GateResult(ERROR_SHARE, threshold, len(shares), failures)


def _parity(con: duckdb.DuckDBPyConnection, sweep_id: str) -> GateResult:
    rows = con.execute(_PARITY_SQL, [sweep_id]).fetchall()
    failures = tuple(
        f"{_pair(model, scenario)}: {bad}/{graded} graded rollouts differ from the upstream grader on a "
        "deterministic component"
        for model, scenario, graded, bad in rows
        if bad
    )
    return GateResult(PARITY, 1.0, len(rows), failures)


def _has_view(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    found = con.execute("select count(*) from duckdb_views() where view_name = ?", [name]).fetchone()
    return bool(found and found[0])


def _judge_agreement(con: duckdb.DuckDBPyConnection, sweep_id: str, threshold: float) -> GateResult:
    if _has_view(con, "judge_calibration"):
        rows = con.execute(_CALIBRATION_SQL, [sweep_id]).fetchall()
    else:
        rows = con.execute(_AGREEMENT_SQL, [sweep_id, sweep_id]).fetchall()
    failures = tuple(
        f"{judge} on {where}: kappa {kappa:.2f} against the verifiers over {n} rollouts (< {threshold:.2f})"
        for judge, where, n, kappa in rows
        if kappa is not None and kappa < threshold
    )
    return GateResult(JUDGE_AGREEMENT, threshold, len(rows), failures)
