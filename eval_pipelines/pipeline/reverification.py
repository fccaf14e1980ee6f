"""Which partitions a verifier change leaves stale: those whose stored rollouts have no verdict at their
scenario's current verifier version. Each scenario's verifiers have their own version (a content hash of its
verifier package), so editing one scenario's verifier makes only that scenario's partitions stale.

Also what `eval-pipelines reverify` reports afterwards: each re-verified partition's pass rate at every verification
pass it has had, read from the catalog (`verifier_version_pass_rates`).

Used by the `reverify_changed_verifiers` sensor and by `eval-pipelines reverify`; Dagster-free."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.pipeline.steps import check_partition_scores
from eval_pipelines.verifiers.loader import package_version
from eval_pipelines.warehouse.catalog import connect_read_only
from eval_pipelines.warehouse.metrics import VERIFIER_VERSION_PASS_RATES
from eval_pipelines.warehouse.store import Warehouse, distinct_values


@dataclass(frozen=True)
class StoredPartition:
    """A model x scenario with stored rollouts to verify, and how many of them lack a verdict at the scenario's
    current verifier version."""

    model_key: str
    scenario: ScenarioFiles
    verifier_version: str
    #: rollouts with a trace and verifiers but no verdict at `verifier_version`
    unscored: int
    rollouts: int

    @property
    def stale(self) -> bool:
        return self.unscored > 0

    @property
    def label(self) -> str:
        return f"{self.model_key} x {self.scenario.scenario_id}"


def verifier_versions(catalog: ScenarioCatalog, scenario_ids: Iterable[str] | None = None) -> dict[str, str]:
    """scenario_id -> the current version of its verifier package (of every scenario, or of `scenario_ids`)."""
    scenarios = catalog.all() if scenario_ids is None else [catalog.get(s) for s in scenario_ids]
    return {s.scenario_id: package_version(s.verifiers_dir) for s in scenarios}


def stored_partitions(
    warehouse: Warehouse,
    catalog: ScenarioCatalog,
    *,
    scenario_ids: Iterable[str] | None = None,
    sweep_id: str | None = None,
) -> list[StoredPartition]:
    """Every stored model x scenario (of `scenario_ids`, else of every scenario in the catalog) with rollouts to
    verify (of `sweep_id`, else of every sweep), stale or not; sorted by scenario, then model."""
    scenarios = catalog.all() if scenario_ids is None else [catalog.get(s) for s in scenario_ids]
    found: list[StoredPartition] = []
    for scenario in sorted(scenarios, key=lambda s: s.scenario_id):
        for model_key in warehouse.models_of_scenario("rollouts", scenario.key):
            check = check_partition_scores(warehouse, scenario, model_key, scenario.key, sweep_id)
            if check.rollouts:
                found.append(
                    StoredPartition(model_key, scenario, check.verifier_version, check.unscored, check.rollouts)
                )
    return found


def stale_partitions(
    warehouse: Warehouse,
    catalog: ScenarioCatalog,
    *,
    scenario_ids: Iterable[str] | None = None,
    sweep_id: str | None = None,
) -> list[StoredPartition]:
    """The stored partitions (see `stored_partitions`) with rollouts that have no verdict at the current verifier
    version; sorted."""
    found = stored_partitions(warehouse, catalog, scenario_ids=scenario_ids, sweep_id=sweep_id)
    return [p for p in found if p.stale]


def stored_sweep_ids(warehouse: Warehouse) -> list[str]:
    """Every sweep id with rollouts in the warehouse, sorted (reads one column of each rollouts file)."""
    return sorted(str(s) for s in distinct_values(warehouse.files("rollouts"), "sweep_id") if s)


@dataclass(frozen=True)
class VerificationPass:
    """One partition's sweep as one verification pass judged it (a row of `verifier_version_pass_rates`)."""

    sweep_id: str
    scenario_id: str
    model_name: str
    verified_at: dt.datetime
    #: `verifier=version` of every verifier that judged the pass
    verifier_versions: tuple[str, ...]
    n: int
    passes: int
    pass_rate: float | None
    n_errors: int

    def changed_verifiers(self, before: VerificationPass) -> list[str]:
        """`verifier old -> new` for each verifier whose version differs from `before`'s (new ones: `- -> new`)."""
        old = dict(v.split("=", 1) for v in before.verifier_versions)
        changes = []
        for name, version in (v.split("=", 1) for v in self.verifier_versions):
            if old.get(name) != version:
                changes.append(f"{name} {old.get(name, '-')[:8]} -> {version[:8]}")
        return changes


def version_pass_rates(
    duckdb_path: Path, partitions: Sequence[StoredPartition], *, sweep_id: str | None = None
) -> list[VerificationPass]:
    """Every verification pass of the given partitions (of `sweep_id`'s rollouts, else of every sweep), oldest
    first within each sweep x scenario x model, from the catalog at `duckdb_path`."""
    if not partitions:
        return []
    pairs = sorted({(p.scenario.scenario_id, p.model_key) for p in partitions})
    # The partition's model key is the model's name in the sweep config (the partition key is that name).
    where = " or ".join("(scenario_id = ? and model_name = ?)" for _ in pairs)
    params: list[object] = [value for pair in pairs for value in pair]
    if sweep_id is not None:
        where = f"({where}) and sweep_id = ?"
        params.append(sweep_id)
    con = connect_read_only(duckdb_path)
    try:
        rows = con.execute(
            "select sweep_id, scenario_id, model_name, verified_at, verifier_versions, n, passes, pass_rate, "
            f"n_errors from {VERIFIER_VERSION_PASS_RATES.name} where {where} "
            "order by scenario_id, model_name, sweep_id, verified_at",
            params,
        ).fetchall()
    finally:
        con.close()
    return [
        VerificationPass(sweep, scenario, model, at, tuple(versions), n, passes, rate, errors)
        for sweep, scenario, model, at, versions, n, passes, rate, errors in rows
    ]
