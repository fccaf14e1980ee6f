"""A judge is held to its sweep's `min_judge_kappa` everywhere it is judged: the `judge_agreement` gate on
`eval_catalog`, the `judge_calibration` view (through `sweep_settings`), the report's judge section and the viewer
(its own catalog too, while the warehouse is newer than the project's), not to the default 0.6.

One quality judge of kappa 0.7 against the verifiers (20 rollouts, 10 pass; it passes 9 of those and 2 of the
others): under a sweep whose min_judge_kappa is 0.9 every one of them calls it below threshold, under 0.5 none does.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest
from fastapi.testclient import TestClient

from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG, eval_catalog
from eval_pipelines.defs.evals.gates import build_catalog_gate_checks, gate_check_name
from eval_pipelines.defs.evals.resources import EvalPaths
from eval_pipelines.pipeline.gates import JUDGE_AGREEMENT
from eval_pipelines.reports import build_report
from eval_pipelines.reports.viewer import queries
from eval_pipelines.reports.viewer.app import create_app
from eval_pipelines.schemas.judging import DEFAULT_JUDGE_MIN_KAPPA, FLAG_KAPPA_BELOW_THRESHOLD
from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from eval_pipelines.warehouse.rows import build_table
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import JUDGEMENTS
from tests.reports.synthetic_warehouse import T0, attempts_with, scenario_key, write_warehouse

SCN = "scn:1.0.0"
SWEEP_ID = "judged-20260101"  # `judged`'s id of a day, as default_sweep_id makes it
#: Rollouts 0-9 pass the verifiers, 10-19 fail them; the judge fails rollout 9 and passes 10 and 11.
JUDGE_PASSES = [*range(9), 10, 11]
KAPPA = 0.7  # observed agreement 17/20, chance agreement 0.55 * 0.5 + 0.45 * 0.5 = 0.5
FLAG = f"flagged: kappa {KAPPA:.2f}"


def _sweep_yaml(min_judge_kappa: float) -> str:
    return (
        "name: judged\n"
        f'scenarios: ["{SCN}"]\n'
        "models:\n"
        '  - {name: model-a, model: m, base_url: "sim://local"}\n'
        f"min_judge_kappa: {min_judge_kappa}\n"
    )


def _judgements() -> dict[str, list[object]]:
    ids = range(20)
    return {
        "sweep_id": [SWEEP_ID for _ in ids],
        "rollout_id": [f"{SWEEP_ID}-model-a-{scenario_key(SCN)}-{i}" for i in ids],
        "scenario_id": [SCN for _ in ids],
        "task_id": ["t1" for _ in ids],
        "model_name": ["model-a" for _ in ids],
        "judge": ["veritas-q" for _ in ids],
        "judge_id": ["j1" for _ in ids],
        "judge_kind": ["quality" for _ in ids],
        "judge_model": ["veritas" for _ in ids],
        "score": [9.0 if i in JUDGE_PASSES else 2.0 for i in ids],
        "category": [None for _ in ids],
        "rationale": ["" for _ in ids],
        "ground_truth": [None for _ in ids],
        "dataset_id": [None for _ in ids],
        "judged_at": [T0 + timedelta(minutes=5) for _ in ids],
    }


def _publish(paths: EvalPaths) -> dg.AssetCheckEvaluation:
    """`eval_catalog` with its gate checks, as a CLI sweep publishes it (the run names the sweep): the judge gate."""
    defs = dg.Definitions(
        assets=[eval_catalog],
        asset_checks=build_catalog_gate_checks(),
        jobs=[dg.define_asset_job("publish", dg.AssetSelection.all() | dg.AssetSelection.all_asset_checks())],
        resources={"paths": paths},
    )
    result = defs.resolve_job_def("publish").execute_in_process(
        instance=dg.DagsterInstance.ephemeral(),
        tags={SWEEP_TAG: "judged", SWEEP_ID_TAG: SWEEP_ID},
        raise_on_error=False,
    )
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    return checks[gate_check_name(JUDGE_AGREEMENT)]


def _calibration(db: Path) -> tuple[bool, str | None, float]:
    con = connect_read_only(db)
    try:
        row = con.execute(
            "select flagged, flag_reason, min_kappa, kappa from judge_calibration where sweep_id = ?", [SWEEP_ID]
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    assert abs(row[3] - KAPPA) < 1e-9, row
    return bool(row[0]), row[1], float(row[2])


@pytest.mark.parametrize("min_judge_kappa", [0.9, 0.5])
def test_gate_view_report_and_viewer_hold_a_judge_to_its_sweeps_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, min_judge_kappa: float
) -> None:
    below = min_judge_kappa > KAPPA  # the judge falls short of its sweep's threshold
    monkeypatch.setenv("EVAL_PIPELINES_PROJECT_DIR", str(tmp_path))  # the viewer reads the project's sweeps
    monkeypatch.setattr(queries, "WAREHOUSE_CHECK_SECONDS", 0.0)  # it looks at the warehouse on every request
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "judged.yaml").write_text(_sweep_yaml(min_judge_kappa), encoding="utf-8")
    paths = EvalPaths(data_dir=str(tmp_path / "data"), sweeps_dir=str(sweeps))
    write_warehouse(paths.warehouse, attempts_with({"t1": (20, 10)}, scenario_id=SCN, sweep_id=SWEEP_ID))
    written = Warehouse(paths.warehouse).write(
        "judgements",
        build_table(JUDGEMENTS, _judgements()),
        model_key="model-a",
        scenario_key=scenario_key(SCN),
        file_stem="judged",
    )

    gate = _publish(paths)
    assert gate.passed is not below, gate.description

    flagged, reason, threshold = _calibration(paths.duckdb)
    assert threshold == min_judge_kappa
    assert (flagged, reason) == ((True, FLAG_KAPPA_BELOW_THRESHOLD) if below else (False, None))

    html = build_report(paths.duckdb, tmp_path / "report.html", sweep_id=SWEEP_ID).html.read_text(encoding="utf-8")
    assert "veritas-q" in html
    assert (FLAG in html) is below, html[html.find("veritas-q") - 200 :][:2000]
    if below:
        assert f"{FLAG} &lt; {min_judge_kappa:g}" in html

    with TestClient(create_app(paths.duckdb)) as client:
        page = client.get("/judges", params={"sweep": SWEEP_ID}).text
        assert ("judge-flagged" in page, FLAG in page) == (below, below), page
        # A newer warehouse file: the viewer reads a catalog of its own, with the same threshold.
        future = time.time() + 60
        os.utime(written, (future, future))
        assert 'id="catalog-note"' in client.get("/", params={"sweep": SWEEP_ID}).text
        page = client.get("/judges", params={"sweep": SWEEP_ID}).text
        assert ("judge-flagged" in page, FLAG in page) == (below, below), page


def test_a_catalog_built_without_the_sweeps_configs_flags_against_the_default(tmp_path: Path) -> None:
    root = tmp_path / "warehouse"
    write_warehouse(root, attempts_with({"t1": (20, 10)}, scenario_id=SCN, sweep_id=SWEEP_ID))
    Warehouse(root).write(
        "judgements",
        build_table(JUDGEMENTS, _judgements()),
        model_key="model-a",
        scenario_key=scenario_key(SCN),
        file_stem="judged",
    )
    plain = build_catalog(root, tmp_path / "plain.duckdb").path
    assert _calibration(plain) == (False, None, DEFAULT_JUDGE_MIN_KAPPA)
    strict = build_catalog(root, tmp_path / "strict.duckdb", judge_min_kappa={SWEEP_ID: 0.75}.get).path
    assert _calibration(strict) == (True, FLAG_KAPPA_BELOW_THRESHOLD, 0.75)
    con = connect_read_only(strict)
    try:
        assert con.execute("select * from sweep_settings").fetchall() == [(SWEEP_ID, 0.75, True)]
    finally:
        con.close()
