"""How a rollout's artifacts are stored and read back: compressed (zstd) under `.json.zst`, plain JSON files of
earlier versions still readable, a damaged file a clear error for one rollout (never a crash of the whole step),
and the service's HTTP route still answering plain JSON."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
import zstandard

from eval_pipelines.clients.evaluation import API_KEY_HEADER, EvaluationClient
from eval_pipelines.pipeline.steps import _artifacts_of
from eval_pipelines.reports.viewer.detail import npc_transcripts
from eval_pipelines.schemas import artifacts as artifacts_module
from eval_pipelines.schemas.artifacts import (
    META_NPC_TRANSCRIPTS,
    META_STATE,
    STORED_ARTIFACTS_SUFFIX,
    RunArtifacts,
    UnreadableArtifacts,
)
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult
from eval_pipelines.service.layout import rollout_artifacts_path, service_paths, stored_rollout_artifacts
from eval_pipelines.verifiers.isolation import VerifyJob, run_in_process, run_jobs
from eval_pipelines.verifiers.loader import load_verifier_package
from eval_pipelines.warehouse.rows import RolloutContext
from tests.service.eval_service_support import WRITE_KEY, launch, running_service
from tests.support.stored_files import ZSTD_MAGIC


def _mailbox(count: int) -> dict[str, Any]:
    return {
        "emails": [
            {
                "id": f"msg_{i:03d}",
                "from": f"colleague{i}@example.com",
                "subject": f"Quarterly figures, part {i}",
                "body": "Please review the attached figures before Friday's meeting. " * 3,
                "labels": ["inbox"],
                "read": False,
            }
            for i in range(count)
        ]
    }


def _rollout_like() -> RunArtifacts:
    """A trace shaped like the benchmark task's: a mailbox before and after, a few tool calls, an answer."""
    artifacts = RunArtifacts(task_id="t1", task="Reply to the quarterly thread", model="sim-oracle")
    artifacts.record_message("user", artifacts.task)
    for step in range(3):
        call = ToolCall(tool_server="email", tool_name="get_email", parameters={"id": f"msg_{step:03d}"})
        artifacts.record_message("assistant", None, tool_calls=[{"id": f"c{step}", "type": "function"}])
        artifacts.record_message("tool", f"email {step}", tool_call_id=f"c{step}")
        artifacts.record_tool_call(call, ToolCallResult(observation=f"email {step}"))
    final = _mailbox(40)
    final["emails"].append({"id": "msg_reply", "from": "me@example.com", "subject": "Re: figures", "body": "Done."})
    artifacts.metadata[META_STATE] = {"email": {"initial": _mailbox(40), "final": final}}
    artifacts.metadata[META_NPC_TRANSCRIPTS] = {"priya": [{"role": "user", "content": "hi", "timestamp": "t"}]}
    artifacts.set_final_observation("I replied to the thread.")
    return artifacts


def _same(a: RunArtifacts, b: RunArtifacts) -> bool:
    return a.model_dump(mode="json") == b.model_dump(mode="json")


# --- the format -------------------------------------------------------------------------------------------------


def test_stored_artifacts_round_trip_compressed(tmp_path: Path) -> None:
    artifacts = _rollout_like()
    stored = artifacts.dump(tmp_path / "run" / f"ro_1{STORED_ARTIFACTS_SUFFIX}")

    raw = stored.read_bytes()
    assert raw.startswith(ZSTD_MAGIC)
    plain_size = len(artifacts.model_dump_json(indent=2).encode())
    assert len(raw) * 5 < plain_size, (len(raw), plain_size)  # the two snapshots mostly repeat each other
    assert _same(RunArtifacts.load(stored), artifacts)
    assert [p.name for p in stored.parent.iterdir()] == [stored.name]  # no temp file left beside it


def test_plain_json_files_still_load(tmp_path: Path) -> None:
    """`dump` to a `.json` name is spec 001's helper (indented JSON), and files stored before compression, which
    the warehouse's `artifacts_path` still points at, load as they are."""
    artifacts = _rollout_like()
    spec_dump = artifacts.dump(tmp_path / "spec.json")
    assert json.loads(spec_dump.read_text(encoding="utf-8"))["task_id"] == "t1"
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps(artifacts.to_dict(), indent=2), encoding="utf-8")  # as the service wrote them

    assert _same(RunArtifacts.load(spec_dump), artifacts)
    assert _same(RunArtifacts.load(legacy), artifacts)
    assert _same(RunArtifacts.load(str(legacy)), artifacts)


def _damaged(tmp_path: Path, how: str) -> Path:
    stored = _rollout_like().dump(tmp_path / f"damaged{STORED_ARTIFACTS_SUFFIX}")
    raw = stored.read_bytes()
    content = {
        "truncated frame": raw[: len(raw) // 2],
        "frame header only": raw[:6],
        "magic then garbage": ZSTD_MAGIC + b"\x00not a frame",
        "truncated json": _rollout_like().model_dump_json().encode()[:500],
        "json but no record": b'["not", "artifacts"]',
        "empty": b"",
    }[how]
    stored.write_bytes(content)
    return stored


@pytest.mark.parametrize(
    "how",
    ["truncated frame", "frame header only", "magic then garbage", "truncated json", "json but no record", "empty"],
)
def test_a_damaged_file_is_a_clear_error(tmp_path: Path, how: str) -> None:
    damaged = _damaged(tmp_path, how)
    with pytest.raises(UnreadableArtifacts) as caught:
        RunArtifacts.load(damaged)
    assert str(damaged) in str(caught.value)
    assert isinstance(caught.value, ValueError)  # handled wherever a parse error already was


def test_sizes_beyond_the_limit_are_refused_before_reading_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    artifacts = _rollout_like()
    compact = artifacts.model_dump_json().encode()
    stored = artifacts.dump(tmp_path / f"big{STORED_ARTIFACTS_SUFFIX}")
    no_declared_size = tmp_path / f"undeclared{STORED_ARTIFACTS_SUFFIX}"
    no_declared_size.write_bytes(zstandard.ZstdCompressor(write_content_size=False).compress(compact))
    plain = artifacts.dump(tmp_path / "big.json")
    # Small files, large content: the frame's declared size, the decompressed output and a plain file are capped.
    limit = stored.stat().st_size + no_declared_size.stat().st_size + 100
    assert limit < len(compact)
    monkeypatch.setattr(artifacts_module, "MAX_ARTIFACTS_BYTES", limit)

    for path in (stored, plain):
        with pytest.raises(UnreadableArtifacts, match="limit of stored artifacts"):
            RunArtifacts.load(path)
    with pytest.raises(UnreadableArtifacts, match=f"zstd frame of at most {limit:,} bytes"):
        RunArtifacts.load(no_declared_size)
    with pytest.raises(UnreadableArtifacts, match="limit"):
        RunArtifacts.from_stored_bytes(compact)


def test_a_failed_write_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / f"ro_1{STORED_ARTIFACTS_SUFFIX}"
    target.mkdir()  # something in the way: the write fails as on a read-only or full disk
    with pytest.raises(OSError):
        _rollout_like().dump(target)
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_the_layout_finds_a_rollout_stored_before_compression(tmp_path: Path) -> None:
    current = rollout_artifacts_path(tmp_path, "run_1", "ro_1")
    assert current.name == f"ro_1{STORED_ARTIFACTS_SUFFIX}"
    assert stored_rollout_artifacts(tmp_path, "run_1", "ro_1") == current  # neither exists: where it will be
    legacy = _rollout_like().dump(tmp_path / "run_1" / "ro_1.json")
    assert stored_rollout_artifacts(tmp_path, "run_1", "ro_1") == legacy
    _rollout_like().dump(current)
    assert stored_rollout_artifacts(tmp_path, "run_1", "ro_1") == current


# --- the readers ------------------------------------------------------------------------------------------------

VERIFIER = "def verify(run_artifacts):\n    return True, 'read ' + run_artifacts.task_id\n"


def test_verifiers_read_compressed_and_plain_files_and_report_a_damaged_one(tmp_path: Path) -> None:
    package = tmp_path / "pkg" / "verifiers"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "reads.py").write_text(VERIFIER)
    compressed = _rollout_like().dump(tmp_path / f"a{STORED_ARTIFACTS_SUFFIX}")
    plain = _rollout_like().dump(tmp_path / "b.json")
    damaged = _damaged(tmp_path, "truncated frame")
    jobs = [VerifyJob(path, ("reads",)) for path in (compressed, plain, damaged)]

    # In this process and in the contained worker (which gets the file's bytes, still compressed, through a pipe).
    for results in (
        run_in_process(load_verifier_package(package), jobs),
        run_jobs(jobs, package, isolated=True, timeout_seconds=30),
    ):
        (first,), (second,), (third,) = results
        assert (first.success, first.message) == (True, "read t1")
        assert (second.success, second.message) == (True, "read t1")
        assert third.is_error and not third.success
        assert "artifacts could not be read" in third.message and "zstd frame" in third.message


def test_the_viewer_reads_npc_transcripts_from_a_compressed_trace(tmp_path: Path) -> None:
    compressed = _rollout_like().dump(tmp_path / f"a{STORED_ARTIFACTS_SUFFIX}")
    assert npc_transcripts(str(compressed)) == {"priya": [{"role": "user", "content": "hi", "timestamp": "t"}]}
    assert npc_transcripts(str(_damaged(tmp_path, "truncated frame"))) is None  # the page still renders
    assert npc_transcripts(str(tmp_path / "gone.json.zst")) is None


class _LocalBackend:
    """The collector's view of a service sharing this disk (`EvaluationBackend.artifacts_file`)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def artifacts_file(self, run_id: str, rollout_id: str) -> Path | None:
        return self.path if self.path.is_file() else None

    def get_artifacts(self, rollout_id: str) -> RunArtifacts | None:
        return None  # the service answers 404 for a file it cannot read either


def test_the_collector_records_a_damaged_trace_as_a_missing_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = RolloutContext("sweep", "run", "m", "s", "model", True)
    original = _rollout_like()
    stored = original.dump(tmp_path / f"ok{STORED_ARTIFACTS_SUFFIX}")
    found, path = _artifacts_of(_LocalBackend(stored), "run", "ok", ctx, tmp_path / "traces")
    assert found is not None and _same(found, original) and path == str(stored)

    damaged = _damaged(tmp_path, "truncated frame")
    with caplog.at_level(logging.WARNING):
        assert _artifacts_of(_LocalBackend(damaged), "run", "bad", ctx, tmp_path / "traces") == (None, None)
    assert not (tmp_path / "traces").exists()  # nor a second copy fetched for it
    assert "rollout bad is collected without its trace" in caplog.text and "zstd frame" in caplog.text


# --- the service ------------------------------------------------------------------------------------------------


def _point_store_at(data_dir: Path, rollout_id: str, path: Path) -> None:
    """What a store written before compression holds: the path of a plain JSON file."""
    with sqlite3.connect(service_paths(data_dir)[0]) as db:
        db.execute("update rollouts set artifacts_path = ? where rollout_id = ?", (str(path), rollout_id))


async def test_the_http_route_answers_plain_json_from_any_stored_form(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with running_service(data_dir) as running:
        async with EvaluationClient(running.url, WRITE_KEY) as client:
            launched = await client.launch_run(launch(["email_ops_001"]))
            await client.wait_for_run(launched.run_id, deadline_seconds=60, poll_interval=0.05)
        rollout_id = launched.rollouts[0].rollout_id
        stored = rollout_artifacts_path(service_paths(data_dir)[1], launched.run_id, rollout_id)
        assert stored.read_bytes().startswith(ZSTD_MAGIC)
        on_disk = RunArtifacts.load(stored)
        assert on_disk.metadata[META_STATE]["email"]["final"]  # the snapshots are kept, compressed

        async with httpx.AsyncClient(base_url=running.url, headers={API_KEY_HEADER: WRITE_KEY}) as http:
            route = f"/rollouts/{rollout_id}/artifacts"

            answer = await http.get(route)
            assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
            assert "content-encoding" not in answer.headers  # decompressed by the service, not handed on
            assert answer.json()["artifacts"] == on_disk.model_dump(mode="json")

            legacy = on_disk.dump(stored.with_name(f"{rollout_id}.json"))
            stored.unlink()
            _point_store_at(data_dir, rollout_id, legacy)
            answer = await http.get(route)
            assert answer.status_code == 200 and answer.json()["artifacts"] == on_disk.model_dump(mode="json")

            legacy.write_bytes(legacy.read_bytes()[:300])
            answer = await http.get(route)
            assert answer.status_code == 404 and "cannot be read" in answer.text
            assert str(data_dir) not in answer.text  # the cause, with its server path, stays in the log
            assert (await http.get(f"/rollouts/{rollout_id}")).status_code == 200  # the service goes on
