"""The line a sweep ends with names why its errors happened, wherever the reason was stored.

A rollout that failed keeps its reason in `rollouts.error`; a verifier error and an NPC-model error end a rollout
that completed, so theirs is only in the verdict's message and in the final attempt's message. Both runs go through
the embedded backend and `run_and_collect`, then verification and the catalog, as a sweep's steps do; the exit
line is `cli.sweep_exit_code`'s, the asset check's is `health.partition_error_share`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipelines.cli import EXIT_ERRORS, sweep_exit_code
from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.pipeline.gates import Thresholds
from eval_pipelines.pipeline.health import partition_error_share
from eval_pipelines.pipeline.steps import verification_files
from eval_pipelines.verifiers.loader import package_version
from eval_pipelines.warehouse.store import Warehouse
from tests.reliability.support_faults import closed_port
from tests.reliability.support_runs import (
    MODEL_KEY,
    SCENARIO_ID,
    collect,
    launch_request,
    model_config,
)
from tests.reliability.test_fault_npc_model import _run as run_with_npc_model
from tests.reliability.test_fault_scenario_files import TARGET_VERIFIER, _break_verifier


def _exit_line(db: Path, sweep_id: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert sweep_exit_code(db, sweep_id, Thresholds(error_threshold=0.0), []) == EXIT_ERRORS
    [line] = [ln for ln in capsys.readouterr().err.splitlines() if "errors above" in ln]
    return line


def test_the_exit_line_names_a_verifier_errors_stored_reason(
    scenarios_copy: Path,
    data_dir: Path,
    local_backend: Callable[..., EvaluationBackend],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _break_verifier(scenarios_copy, "import os; os._exit(3)")
    catalog = ScenarioCatalog(scenarios_copy)
    scenario = catalog.get(SCENARIO_ID)
    run = collect(local_backend(data_dir, catalog), launch_request(model_config("sim://local")), scenario, data_dir)
    run.scores(data_dir / "eval.duckdb")  # verification, then the catalog

    line = _exit_line(data_dir / "eval.duckdb", "reliability", capsys)
    assert f"(verifier: {TARGET_VERIFIER}: Verifier process exited with code 3" in line, line

    share = partition_error_share(
        run.warehouse,
        MODEL_KEY,
        scenario.key,
        sweep_id="reliability",
        verification_files=verification_files(
            run.warehouse, MODEL_KEY, scenario.key, package_version(scenario.verifiers_dir)
        ),
    )
    assert share is not None and "Verifier process exited with code 3" in share.line(), share


def test_the_exit_line_names_an_npc_model_errors_stored_reason(
    catalog: ScenarioCatalog,
    data_dir: Path,
    local_backend: Callable[..., EvaluationBackend],
    capsys: pytest.CaptureFixture[str],
) -> None:
    npc_down = f"http://127.0.0.1:{closed_port()}/v1"
    run_with_npc_model(local_backend(data_dir, catalog), catalog, data_dir, npc_down)

    line = _exit_line(data_dir / "eval.duckdb", "npc-faults", capsys)
    assert "(npc_model: the NPC model failed" in line, line

    scenario = catalog.get("team_chat:1.0.0")
    share = partition_error_share(
        Warehouse(data_dir / "warehouse"), "m", scenario.key, sweep_id="npc-faults", verification_files=[]
    )
    assert share is not None and "npc_model: the NPC model failed" in share.line(), share
