"""Rubric-judge rows never change a pass rate, and rubric_verifier_agreement reports agreement and kappa."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import ModuleType

from eval_pipelines.schemas.verifiers import VerifierKind
from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from eval_pipelines.warehouse.rows import rollout_tables, verification_table
from eval_pipelines.warehouse.store import Warehouse

# rollout -> (programmatic pass, rubric judge pass)
VERDICTS = {"a": (True, True), "b": (True, False), "c": (False, False), "d": (False, False), "e": (True, True)}


def test_rubric_rows_are_compared_not_counted(tmp_path: Path, f: ModuleType) -> None:
    warehouse = Warehouse(tmp_path / "warehouse")
    ctx = f.make_ctx()
    rollouts = [(f.make_rollout(r, index=i), None, None) for i, r in enumerate(VERDICTS)]
    for name, table in rollout_tables(ctx, rollouts).items():
        warehouse.write(name, table, model_key=ctx.model_key, scenario_key=ctx.scenario_key, file_stem="run")
    records = []
    for rollout_id, (programmatic, rubric) in VERDICTS.items():
        records.append(f.make_verification(rollout_id, "state_check", "v1", programmatic))
        judged = f.make_verification(rollout_id, "rubric_judge", "j1", rubric)
        records.append(replace(judged, outcome=judged.outcome.model_copy(update={"kind": VerifierKind.RUBRIC})))
    warehouse.write(
        "verifications",
        verification_table(records),
        model_key=ctx.model_key,
        scenario_key=ctx.scenario_key,
        file_stem="v",
    )
    db = build_catalog(warehouse.root, tmp_path / "eval.duckdb").path
    con = connect_read_only(db)
    try:
        rate = con.execute("select pass_rate from pass_rates").fetchone()
        agreement = con.execute(
            "select n, both_pass, both_fail, judge_only_pass, verifier_only_pass, agreement, kappa "
            "from rubric_verifier_agreement"
        ).fetchone()
    finally:
        con.close()
    assert rate == (3 / 5,)  # programmatic verdicts only; the rubric judge's 2/5 does not leak in
    # Hand-worked: po = 4/5; pe = (2/5)(3/5) + (3/5)(2/5) = 12/25; kappa = (20/25 - 12/25) / (13/25) = 8/13.
    assert agreement is not None and agreement[:5] == (5, 2, 2, 0, 1)
    assert abs(agreement[5] - 0.8) < 1e-12 and abs(agreement[6] - 8 / 13) < 1e-12
