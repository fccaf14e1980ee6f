"""The generic upstream tool server through the tool host: a workspace is created and seeded in the upstream
worker, lists the task's tools, runs calls there (a failed call keeps what it changed, as upstream does), mirrors
the worker's state in snapshots and diffs, and is deleted; a worker failure is a tool_server error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from eval_pipelines.engine.rollout import _error_behind_failure
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.runs import ErrorClass
from eval_pipelines.schemas.tools import ToolCallResult
from eval_pipelines.toolservers.host import ToolServerHost, ToolServerProcess
from tests.benchmarks.upstream_fake import FAKE_TOOLS, FakeCounterServer, python_override


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Iterator[ToolServerHost]:
    monkeypatch.setenv(*python_override())
    with ToolServerHost(["email", "fakebench"], extra={"fakebench": FakeCounterServer}) as running:
        yield running
    server = running.servers["fakebench"]
    assert isinstance(server, FakeCounterServer)
    # the host's shutdown stopped the upstream worker
    assert server._worker is None or not server._worker.is_running()


def _step(client: httpx.Client, path: str, tool: str, parameters: dict[str, Any]) -> dict[str, Any]:
    answer = client.post(f"{path}/step", json={"action": {"tool_name": tool, "parameters": parameters}})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_create_seed_call_snapshot_delete(host: ToolServerHost) -> None:
    server = host.servers["fakebench"]
    assert isinstance(server, FakeCounterServer) and server._worker is None  # nothing started before a workspace
    with httpx.Client(base_url=host.base_url("fakebench"), timeout=30) as client:
        created = client.post("/workspaces", json={"seed": [{"start": 2, "tools": FAKE_TOOLS}]})
        assert created.status_code == 201, created.text
        assert created.json()["state"] == {"counter": {"value": 2}}
        path = created.json()["path"]
        tools = client.get(f"{path}/tools").json()["tools"]
        assert [t["name"] for t in tools] == ["add"]
        assert tools[0]["parameters"]["properties"] == {"by": {"type": "integer"}}

        added = _step(client, path, "add", {"by": 3})
        assert added["observation"] == "5" and not added.get("is_error")
        assert added["state_diff"]["after"] == {"counter": {"value": 5}}
        # arguments are not validated here: upstream's own error text reaches the model, and its changes stay
        failed = _step(client, path, "nope", {"whatever": [1]})
        assert failed["is_error"] and failed["observation"] == "Error: no such function nope"
        assert "error_source" not in failed
        snapshot = client.get(f"{path}/snapshot", params={"text": "false"}).json()
        assert snapshot["state"] == {"counter": {"value": 105}}

        second = client.post("/workspaces", json={"seed": [{"start": 0, "tools": FAKE_TOOLS}]}).json()["path"]
        assert _step(client, second, "add", {})["observation"] == "1"  # workspaces are apart

        assert client.delete(path).status_code == 200
        assert client.get(f"{path}/snapshot").status_code == 404
    worker = server._worker
    assert worker is not None and worker.generation == 1


def test_a_bad_seed_is_a_400_and_leaves_no_workspace(host: ToolServerHost) -> None:
    with httpx.Client(base_url=host.base_url("fakebench"), timeout=30) as client:
        refused = client.post("/workspaces", json={"workspace_id": "w1", "seed": [{"unknown_field": 1}]})
        assert refused.status_code == 400 and "TypeError" in refused.json()["detail"]
        reserved = client.post("/workspaces", json={"seed": [{"start": 1, "timeout": 0}]})
        assert reserved.status_code == 400 and "reserved" in reserved.json()["detail"]
        assert client.post("/workspaces", json={"workspace_id": "w1", "seed": [{"start": 1}]}).status_code == 201


def test_a_worker_crash_during_a_call_is_a_tool_server_error(host: ToolServerHost) -> None:
    with httpx.Client(base_url=host.base_url("fakebench"), timeout=30) as client:
        path = client.post("/workspaces", json={"seed": [{"start": 1}]}).json()["path"]
        crashed = _step(client, path, "crash", {})
        assert crashed["is_error"] and crashed["error_source"] == ErrorClass.TOOL_SERVER.value
        assert "the fake backend dies" in crashed["observation"]
        # the restarted worker does not hold the workspace: still infrastructure, never the agent's
        lost = _step(client, path, "add", {})
        assert lost["error_source"] == ErrorClass.TOOL_SERVER.value
        assert client.get(f"{path}/snapshot").json()["state"] == {"counter": {"value": 1}}
        fresh = client.post("/workspaces", json={"seed": [{"start": 4}]}).json()["path"]
        assert _step(client, fresh, "add", {})["observation"] == "5"


def test_the_host_process_serves_benchmark_servers_beside_the_built_in_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(*python_override())
    with ToolServerProcess(["email", "fakebench"], extra={"fakebench": FakeCounterServer}) as process:
        with httpx.Client(base_url=process.base_url("fakebench"), timeout=30) as client:
            path = client.post("/workspaces", json={"seed": [{"start": 10, "tools": FAKE_TOOLS}]}).json()["path"]
            assert _step(client, path, "add", {"by": 5})["observation"] == "15"
            assert client.delete(path).status_code == 200
        assert httpx.get(f"{process.url}/health").json()["servers"] == ["email", "fakebench"]


def test_a_rollout_that_fails_after_a_tool_server_failure_is_a_tool_server_error() -> None:
    artifacts = RunArtifacts(task_id="t", task="t")
    artifacts.tool_results.append(ToolCallResult(observation="5", is_error=False))
    assert _error_behind_failure(artifacts, []) == (None, None)  # a plain failure is the agent's own
    artifacts.tool_results.append(ToolCallResult(observation="crashed", is_error=True, error_source="tool_server"))
    error_class, cause = _error_behind_failure(artifacts, [])
    assert error_class == ErrorClass.TOOL_SERVER and cause is not None and "tool server failed 1 time" in cause
