"""NPC-model faults: the model that plays a colleague is down, or answers without revealing what its persona
must reveal when asked. Either way the task cannot be done, and the rollout is an `npc_model` error, never
the agent's failure.

A team_chat task whose answer only an NPC knows (team_chat_003: Priya Raman holds the door code) runs through the
embedded backend and `run_and_collect` with sim-oracle as the agent (it follows the reference actions, so it
asks the right NPC the right question) and a third-party NPC model that breaks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.pipeline.steps import run_and_collect, verify_partition
from eval_pipelines.schemas.runs import ErrorClass, RunLaunchRequest
from eval_pipelines.toolservers.npc import withheld_secrets
from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse
from tests.reliability.support_faults import closed_port
from tests.support.scripted_llm import Script, create_scripted_app, text_reply

SCENARIO_ID = "team_chat:1.0.0"
#: Needs the door code that only the NPC priya_raman reveals, when asked about it.
SECRET_TASK = "team_chat_003"
RETRIES = 1


@pytest.fixture
def evasive_npc_model() -> Iterator[str]:
    """An NPC model that answers every message, but never with what it was asked for."""
    server = BackgroundServer(create_scripted_app(Script([text_reply("Hmm, I'm not sure, sorry. Ask me later?")])))
    server.start()
    yield f"{server.url}/v1"
    server.stop()


def _run(backend: EvaluationBackend, catalog: ScenarioCatalog, data_dir: Path, npc_base_url: str) -> dict[str, Any]:
    scenario = catalog.get(SCENARIO_ID)
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": SCENARIO_ID,
            "task_ids": [SECRET_TASK],
            "model_config": {"model": "sim-oracle", "base_url": "sim://local", "api_key": "x"},
            "user_model_config": {"model": "npc-model", "base_url": npc_base_url, "api_key": "npc-key"},
            "rollout_count": 1,
            "run_name": f"npc-fault-{uuid.uuid4().hex[:12]}",
            "error_retries": RETRIES,
            "error_retry_backoff_seconds": 0.01,
        }
    )
    ctx = RolloutContext("npc-faults", request.run_name or "", "m", scenario.key, "m", is_simulated=True)
    warehouse = Warehouse(data_dir / "warehouse")
    summary = run_and_collect(backend, request, ctx, scenario, warehouse, data_dir / "traces", timeout_seconds=60)
    [rollout] = backend.list_rollouts(summary.run_id)
    verify_partition(warehouse, scenario, "m", scenario.key)
    build_catalog(warehouse.root, data_dir / "eval.duckdb")
    con = connect_read_only(data_dir / "eval.duckdb")
    try:
        outcome, error_class = con.execute("select outcome, error_class from rollout_scores").fetchone() or (None, None)
        n, n_errors, pass_rate = con.execute("select n, n_errors, pass_rate from pass_rates").fetchone() or (0, 0, 0)
    finally:
        con.close()
    assert rollout.result is not None
    return {
        "result": rollout.result,
        "outcome": outcome,
        "error_class": error_class,
        "rates": (n, n_errors, pass_rate),
        "artifacts": backend.get_artifacts(rollout.rollout_id),
    }


@pytest.mark.parametrize("npc", ["down", "evasive"])
def test_a_failing_npc_model_is_an_npc_model_error_retried_and_left_out_of_the_pass_rate(
    npc: str,
    catalog: ScenarioCatalog,
    data_dir: Path,
    request: pytest.FixtureRequest,
    local_backend: Callable[..., EvaluationBackend],
) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1" if npc == "down" else request.getfixturevalue("evasive_npc_model")
    run = _run(local_backend(data_dir, catalog), catalog, data_dir, base_url)
    result = run["result"]
    assert (result.error_class, result.attempts) == (ErrorClass.NPC_MODEL, 1 + RETRIES), result.message
    assert [e.error_class for e in result.attempt_errors] == [ErrorClass.NPC_MODEL] * RETRIES
    assert (run["outcome"], run["error_class"]) == ("error", "npc_model")
    assert run["rates"] == (0, 1, None)
    expected = "the NPC model failed" if npc == "down" else "never revealed"
    assert expected in result.message, result.message


def test_withheld_secrets_reads_the_conversation_not_error_text() -> None:
    state = {
        "npcs": {"priya": {"email": "priya@example.com", "secret": {"value": "4827#", "reveal_when": ["door code"]}}},
        "messages": {
            "1": {
                "room_id": "dm-priya",
                "sender": "me@example.com",
                "text": "What is the Door Code?",
                "timestamp": "1",
            },
            "2": {"room_id": "dm-priya", "sender": "priya@example.com", "text": "No idea.", "timestamp": "2"},
        },
    }
    assert withheld_secrets(state) == [
        "NPC 'priya' was asked about 'door code' and never revealed what its persona holds"
    ]
    state["messages"]["3"] = {
        "room_id": "dm-priya",
        "sender": "priya@example.com",
        "text": "It's 4827#",
        "timestamp": "3",
    }
    assert withheld_secrets(state) == []  # revealed: any failure is the agent's
    del state["messages"]["3"]
    state["messages"]["1"]["text"] = "How are you?"
    assert withheld_secrets(state) == []  # never asked: the agent's failure, not the NPC's
