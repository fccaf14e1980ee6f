"""Benchmark tasks can open with the same message (BFCL's categories share questions): a request that marks the
task it plays gets that task's gold from the simulated models; a long multi-turn turn is played several calls a
reply so it fits a per-turn step cap; a benchmark's gold call to a tool its turn has not listed is still made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.sim.endpoint import SIM_REPLIES_PER_TURN, ReferenceBook, create_sim_app
from eval_pipelines.sim.task_mark import simulated_request_tag

OPENING = "Move the report into the archive folder."


def _write_scenario(root: Path, family: str, turns: list[list[dict[str, Any]]]) -> str:
    folder = root / family
    (folder / "tasks").mkdir(parents=True)
    (folder / "verifiers").mkdir()
    scenario_id = f"{family}:1.0.0"
    (folder / "template.json").write_text(
        json.dumps({"scenario_id": scenario_id, "name": family, "tool_servers": [{"name": "bfcl"}]})
    )
    task = {
        "task_id": "t_0",
        "name": "t_0",
        "description": OPENING,
        "tool_servers": [{"name": "bfcl"}],
        "bare_tool_names": True,
        "user": {"kind": "scripted", "turns": [OPENING]},
        "reference_turns": [
            [{"tool_server": "bfcl", "tool_name": c["name"], "parameters": c["args"]} for c in t] for t in turns
        ],
    }
    (folder / "tasks" / "t_0.json").write_text(json.dumps(task))
    return scenario_id


def _request(user: str | None, tools: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "sim-oracle",
        "messages": [{"role": "user", "content": OPENING}],
        "tools": [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in tools],
    }
    if user is not None:
        body["user"] = user
    return body


def _calls(response: httpx.Response) -> list[str]:
    message = response.json()["choices"][0]["message"]
    return [call["function"]["name"] for call in message.get("tool_calls") or []]


@pytest.fixture
def sim(tmp_path: Path) -> tuple[TestClient, dict[str, str]]:
    ids = {
        "base": _write_scenario(tmp_path, "bench_base", [[{"name": "mv", "args": {"source": "r"}}]]),
        "param": _write_scenario(tmp_path, "bench_param", [[{"name": "cd", "args": {"folder": "archive"}}]]),
        "long": _write_scenario(
            tmp_path, "bench_long", [[{"name": "touch", "args": {"file_name": f"f{i}"}} for i in range(34)]]
        ),
    }
    return TestClient(create_sim_app(ReferenceBook.from_catalog(ScenarioCatalog(tmp_path)))), ids


def test_a_marked_request_plays_its_own_task(sim: tuple[TestClient, dict[str, str]]) -> None:
    client, ids = sim
    tools = ["mv", "cd", "touch"]
    base = client.post("/v1/chat/completions", json=_request(simulated_request_tag("ro_1", ids["base"], "t_0"), tools))
    param = client.post(
        "/v1/chat/completions", json=_request(simulated_request_tag("ro_2", ids["param"], "t_0"), tools)
    )
    assert _calls(base) == ["mv"] and _calls(param) == ["cd"]
    # Without the mark the text alone decides, as before (here: whichever task indexed the opening first).
    assert _calls(client.post("/v1/chat/completions", json=_request("ro_3", tools))) in (["mv"], ["cd"], ["touch"])


def test_a_turn_longer_than_the_reply_budget_is_played_several_calls_a_reply(
    sim: tuple[TestClient, dict[str, str]],
) -> None:
    client, ids = sim
    tag = simulated_request_tag("ro_4", ids["long"], "t_0")
    calls = _calls(client.post("/v1/chat/completions", json=_request(tag, ["touch"])))
    assert len(calls) == -(-34 // SIM_REPLIES_PER_TURN) > 1


def test_a_benchmark_gold_call_to_a_tool_not_yet_listed_is_still_made(
    sim: tuple[TestClient, dict[str, str]],
) -> None:
    client, ids = sim
    tag = simulated_request_tag("ro_5", ids["param"], "t_0")
    assert _calls(client.post("/v1/chat/completions", json=_request(tag, ["mv"]))) == ["cd"]
