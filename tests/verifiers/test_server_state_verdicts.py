"""A verifier that queries a server gets a verdict only from the server as the rollout left it; when it cannot
have that (the server is unreachable, the rollout does not have it, its end state cannot be brought back) the
outcome is a `verifier` error, never a failure, even when the verifier catches what went wrong itself and
returns `(False, "... failed ...")` the way SimLab's do.

Verifiers run in the contained worker, as in a sweep and in POST /runs."""

from __future__ import annotations

import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.pipeline.restored_servers import NO_FINAL_STATE, USER_SERVER_NOT_RESTORABLE, RestoredServers
from eval_pipelines.schemas.artifacts import (
    META_HTTP_SERVERS,
    META_SIMLAB_SERVERS,
    META_STATE,
    META_TOOL_SERVERS,
    RunArtifacts,
)
from eval_pipelines.schemas.verifiers import VerifierOutcome
from eval_pipelines.toolservers import create_app
from eval_pipelines.toolservers.files import FilesServer
from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifyJob

BUNDLE_VERIFIERS = Path(__file__).resolve().parents[1] / "simlab" / "bundles" / "coding_files" / "verifiers"
SUMMARY = "The workspace offers read_file and write_file, list_dir and run_command for the agent's work.\n"

#: SimLab's custom_coding verifier wrapped the way many bundles write theirs: every exception is caught and
#: reported as a failing verdict.
CATCHES_EVERYTHING = """
from summary_file import _call_tool


def verify(run_artifacts):
    try:
        url = run_artifacts.server_url("coding-env") or run_artifacts.tool_server_url
        observation = _call_tool(url, "read_file", {"path": "workspace_summary.md"}).get("observation", {})
    except Exception as exc:
        return False, f"read_file failed: {exc}"
    if observation.get("is_error"):
        return False, "workspace_summary.md missing"
    return True, "workspace_summary.md is there"
"""
#: Asks for a server that no rollout of its task has.
ASKS_FOR_A_SERVER_NOBODY_HAS = """
def verify(run_artifacts):
    url = run_artifacts.server_url("crm-env")
    if not url:
        return False, "crm-env tool server URL was not available to the verifier."
    return True, "asked crm-env"
"""


@pytest.fixture(scope="module")
def verifiers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(shutil.copytree(BUNDLE_VERIFIERS, tmp_path_factory.mktemp("pkg") / "verifiers"))
    (folder / "catches_everything.py").write_text(CATCHES_EVERYTHING.replace("from summary_file", "from .summary_file"))
    (folder / "asks_for_crm.py").write_text(ASKS_FOR_A_SERVER_NOBODY_HAS)
    return folder


@pytest.fixture(scope="module")
def runner(verifiers_dir: Path) -> Iterator[IsolatedVerifierRunner]:
    with IsolatedVerifierRunner(verifiers_dir, timeout_seconds=60) as started:
        yield started


@pytest.fixture(scope="module")
def files_server() -> Iterator[str]:
    with BackgroundServer(create_app(FilesServer())) as served:
        yield served.url


def _workspace(base: str, files: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
    """A files workspace holding `files`: (its URL, its snapshot's state)."""
    with httpx.Client(timeout=30) as http:
        created = http.post(f"{base}/workspaces", json={"workspace_id": uuid.uuid4().hex, "seed": [{"files": files}]})
        assert created.status_code == 201, created.text
        url = f"{base}{created.json()['path']}"
        state: dict[str, Any] = http.get(f"{url}/snapshot", params={"text": "false"}).json()["state"]
    return url, state


def _artifacts(**metadata: Any) -> RunArtifacts:
    return RunArtifacts(task_id="workspace_summary", task="summarise", model="scripted", metadata=metadata)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _verdicts(runner: IsolatedVerifierRunner, artifacts: RunArtifacts | Path, *modules: str) -> list[VerifierOutcome]:
    [outcomes] = runner.run([VerifyJob(artifacts, modules)])
    return outcomes


def test_a_server_of_the_users_own_is_read_live_during_the_run_and_is_an_error_afterwards(
    runner: IsolatedVerifierRunner, files_server: str, tmp_path: Path
) -> None:
    url, _ = _workspace(files_server, [{"path": "workspace_summary.md", "content": SUMMARY}])
    # The task names its own HTTP server for coding-env (it answers in the hosted shape, as SimLab's do).
    live = _artifacts(**{META_HTTP_SERVERS: {"coding-env": f"{url}/hosted"}})
    during = _verdicts(runner, live, "summary_file", "catches_everything")
    assert [(o.success, o.is_error) for o in during] == [(True, False), (True, False)], during

    stored = live.dump(tmp_path / "rollout.json.zst")
    with RestoredServers() as restored:
        after = _verdicts(
            runner, restored.prepare(VerifyJob(stored, ())).artifacts, "summary_file", "catches_everything"
        )
    for outcome in after:  # `except Exception` in the verifier does not swallow it
        assert outcome.is_error and not outcome.success, outcome
        assert "'coding-env'" in outcome.message and USER_SERVER_NOT_RESTORABLE in outcome.message


def test_a_server_without_a_recorded_end_state_is_an_error_after_the_run(
    runner: IsolatedVerifierRunner, files_server: str, tmp_path: Path
) -> None:
    url, _ = _workspace(files_server, [{"path": "workspace_summary.md", "content": SUMMARY}])
    stored = _artifacts(**{META_TOOL_SERVERS: {"files": url}, META_SIMLAB_SERVERS: {"files": "coding-env"}}).dump(
        tmp_path / "rollout.json.zst"
    )
    with RestoredServers() as restored:
        [outcome] = _verdicts(runner, restored.prepare(VerifyJob(stored, ())).artifacts, "summary_file")
    assert outcome.is_error and NO_FINAL_STATE in outcome.message


def test_the_end_state_is_restored_and_read_while_the_rollouts_workspace_is_gone(
    runner: IsolatedVerifierRunner, files_server: str, tmp_path: Path
) -> None:
    url, state = _workspace(files_server, [{"path": "workspace_summary.md", "content": SUMMARY}])
    httpx.delete(url, timeout=30)
    artifacts = _artifacts(
        **{
            META_TOOL_SERVERS: {"files": url},
            META_SIMLAB_SERVERS: {"files": "coding-env"},
            META_STATE: {"files": {"initial": {"files": {}}, "final": state}},
        }
    )
    stored = artifacts.dump(tmp_path / "rollout.json.zst")
    stale = _verdicts(runner, stored, "summary_file", "summary_listed")
    assert all(o.is_error for o in stale), stale  # the rollout's workspace answers 404: no verdict
    with RestoredServers() as restored:
        again = _verdicts(runner, restored.prepare(VerifyJob(stored, ())).artifacts, "summary_file", "summary_listed")
    assert [(o.success, o.is_error) for o in again] == [(True, False), (True, False)], again


def test_an_unreachable_server_is_an_error_whether_the_verifier_raises_or_catches_it(
    runner: IsolatedVerifierRunner,
) -> None:
    port = _closed_port()
    artifacts = _artifacts(
        **{
            META_TOOL_SERVERS: {"files": f"http://127.0.0.1:{port}/workspaces/gone"},
            META_SIMLAB_SERVERS: {"files": "coding-env"},
        }
    )
    raised, caught = _verdicts(runner, artifacts, "summary_file", "catches_everything")
    assert raised.is_error and "URLError" in raised.message, raised
    assert caught.is_error and not caught.success, caught
    assert f"could not reach 127.0.0.1:{port}: ConnectionRefusedError" in caught.message
    assert "read_file failed" in caught.message  # the verifier's own words are kept


def test_a_server_the_rollout_does_not_have_is_an_error(runner: IsolatedVerifierRunner, files_server: str) -> None:
    url, _ = _workspace(files_server, [])
    artifacts = _artifacts(**{META_TOOL_SERVERS: {"files": url}, META_SIMLAB_SERVERS: {"files": "coding-env"}})
    [outcome] = _verdicts(runner, artifacts, "asks_for_crm")
    assert outcome.is_error and "asked for tool server 'crm-env'" in outcome.message, outcome


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_reachable_server_that_holds_no_summary_is_a_failure_not_an_error(
    runner: IsolatedVerifierRunner, files_server: str, host: str
) -> None:
    url, _ = _workspace(files_server, [{"path": "other.txt", "content": "nothing to see"}])
    # `localhost` may resolve to ::1 first, where nothing listens: the retry on 127.0.0.1 is no miss.
    url = url.replace("127.0.0.1", host)
    artifacts = _artifacts(**{META_TOOL_SERVERS: {"files": url}, META_SIMLAB_SERVERS: {"files": "coding-env"}})
    outcomes = _verdicts(runner, artifacts, "summary_file", "summary_listed", "catches_everything")
    assert [(o.success, o.is_error) for o in outcomes] == [(False, False)] * 3, outcomes


def test_a_users_server_whose_url_carries_credentials_is_not_stored_and_a_verifier_learns_why(
    runner: IsolatedVerifierRunner,
) -> None:
    from eval_pipelines.engine.rollout import _record_http_servers

    artifacts = _artifacts()
    _record_http_servers(artifacts, {"coding-env": "https://user:secret@tools.example.com/ws", "crm": "http://h:1/x"})
    assert artifacts.metadata[META_HTTP_SERVERS] == {"crm": "http://h:1/x"}
    assert "secret" not in artifacts.model_dump_json()
    [outcome] = _verdicts(runner, artifacts, "summary_file")
    assert outcome.is_error and "its URL carries credentials" in outcome.message, outcome
