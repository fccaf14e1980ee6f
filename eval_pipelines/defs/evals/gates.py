"""The gates that hold the report, as blocking asset checks: one per gate on `eval_catalog` (a failing one keeps
`eval_report` from being built in the same run, and `eval_report`'s automation condition waits for them), and
`report_gates` on `eval_report`. The verdict is `pipeline/gates.py`'s, the one the CLI prints."""

import warnings
from collections.abc import Sequence

import dagster as dg

from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG
from eval_pipelines.defs.evals.resources import EvalPaths
from eval_pipelines.inputs.sweeps import ConfigError
from eval_pipelines.pipeline.gates import (
    COVERAGE,
    GATES,
    GateResult,
    GateVerdict,
    Thresholds,
    evaluate_gates,
    latest_sweep_id,
    planned_rollouts,
    sweep_config_for,
)

CATALOG_GATE_DESCRIPTIONS = {
    "coverage": "Blocking: each model x scenario of the sweep the catalog publishes has at least the sweep's "
    "min_coverage of its planned rollouts (tasks x rollout_count) scored (passed or failed).",
    "error_share": "Blocking: no model x scenario of the sweep has more than the sweep's error_threshold of its "
    "finished rollouts ended in errors.",
    "parity": "Blocking: no benchmark rollout of the sweep graded by `eval-pipelines parity` differs from the "
    "upstream grader on a deterministic component (passes when nothing was graded).",
    "judge_agreement": "Blocking, when the report shows judge scores: each judge's Cohen's kappa against the "
    "verifiers (judge_calibration, per scenario) is at least the sweep's min_judge_kappa.",
}


#: The gates run whenever the catalog is rebuilt, in the same run (the automation sensor requests them with it, so
#: `eval_report`, whose condition needs them passed or requested, is requested in the same tick and skipped there
#: when one fails).
GATE_CONDITION = dg.AutomationCondition.eager()


def gate_check_name(gate: str) -> str:
    return f"gate_{gate}"


def sweep_verdict(
    context: dg.AssetCheckExecutionContext, paths: EvalPaths, gates: Sequence[str] = GATES
) -> GateVerdict:
    """The verdict of `gates` on the sweep the run names (the CLI tags it), else on the catalog's latest sweep (the
    one the report shows), with that sweep's thresholds and planned rollouts."""
    tags = context.run.tags
    sweep_id = tags.get(SWEEP_ID_TAG) or (latest_sweep_id(paths.duckdb) if paths.duckdb.is_file() else None)
    if sweep_id is None:
        return GateVerdict(None, tuple(GateResult(gate, 0.0, 0) for gate in gates))
    try:
        sweeps = paths.sweeps()
    except ConfigError as exc:
        context.log.warning(f"gates use the default thresholds: {exc}")
        sweeps = {}
    sweep = sweeps.get(tags[SWEEP_TAG]) if SWEEP_TAG in tags else sweep_config_for(sweep_id, sweeps)
    planned = planned_rollouts(sweep, paths.catalog()) if sweep is not None and COVERAGE in gates else None
    return evaluate_gates(paths.duckdb, sweep_id, Thresholds.of(sweep), planned, gates)


def _result(verdict: GateVerdict, result: GateResult) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=result.passed,
        description=result.summary(),
        metadata={
            "sweep_id": verdict.sweep_id or "-",
            "threshold": result.threshold,
            "checked": result.checked,
            "failing": len(result.failures),
        },
    )


def build_gate_checks() -> list[dg.AssetChecksDefinition]:
    """The blocking checks of `eval_catalog` (one per gate) and `eval_report`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [*build_catalog_gate_checks(), _report_gates()]


def build_catalog_gate_checks() -> list[dg.AssetChecksDefinition]:
    """The blocking checks of `eval_catalog`, one per gate."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [_catalog_gate(gate) for gate in GATES]


def _catalog_gate(gate: str) -> dg.AssetChecksDefinition:
    # One check per gate, not one multi-check: the automation conditions see each requested with the catalog.
    @dg.asset_check(
        asset="eval_catalog",
        name=gate_check_name(gate),
        blocking=True,
        description=CATALOG_GATE_DESCRIPTIONS[gate],
        automation_condition=GATE_CONDITION,
    )
    def catalog_gate(context: dg.AssetCheckExecutionContext, paths: EvalPaths) -> dg.AssetCheckResult:
        verdict = sweep_verdict(context, paths, (gate,))
        return _result(verdict, verdict.result(gate))

    return catalog_gate


def _report_gates() -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset="eval_report",
        name="report_gates",
        blocking=True,
        description="Blocking: every gate (coverage, error_share, parity, judge_agreement) passes for the sweep "
        "the report shows; a report built by hand past a failing gate fails here.",
    )
    def report_gates(context: dg.AssetCheckExecutionContext, paths: EvalPaths) -> dg.AssetCheckResult:
        verdict = sweep_verdict(context, paths)
        failed = verdict.failed
        return dg.AssetCheckResult(
            passed=not failed,
            description="; ".join(r.summary() for r in failed) if failed else "every gate passed",
            metadata={
                "sweep_id": verdict.sweep_id or "-",
                "failed_gates": ", ".join(r.gate for r in failed) or "-",
            },
        )

    return report_gates
