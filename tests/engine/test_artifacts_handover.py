"""A record the local service wrote is handed to this process's next reader of its file, once, while the file
is unchanged; everything else reads the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eval_pipelines.schemas import artifacts as artifacts_module
from eval_pipelines.schemas.artifacts import STORED_ARTIFACTS_SUFFIX, RunArtifacts


def _record(task_id: str = "t1") -> RunArtifacts:
    record = RunArtifacts(task_id=task_id, task="Archive the newsletter.")
    record.record_message("user", "Archive the newsletter.")
    record.set_final_observation("done")
    return record


def _path(tmp_path: Path, name: str = "r1") -> Path:
    return tmp_path / f"{name}{STORED_ARTIFACTS_SUFFIX}"


def test_handed_over_record_is_returned_once_then_read_from_file(tmp_path: Path) -> None:
    record = _record()
    path = record.dump(_path(tmp_path), hand_over=True)

    first = RunArtifacts.load(path)
    second = RunArtifacts.load(path)

    assert first is record
    assert second is not record
    assert second == record


def test_without_hand_over_the_file_is_parsed(tmp_path: Path) -> None:
    record = _record()
    path = record.dump(_path(tmp_path))

    loaded = RunArtifacts.load(path)

    assert loaded is not record
    assert loaded == record


def test_a_file_changed_after_the_write_is_read_as_it_now_is(tmp_path: Path) -> None:
    record = _record()
    path = record.dump(_path(tmp_path), hand_over=True)
    replacement = _record("t2")
    replacement.dump(tmp_path / "other.json.zst")
    os.replace(tmp_path / "other.json.zst", path)

    loaded = RunArtifacts.load(path)

    assert loaded is not record
    assert loaded.task_id == "t2"


def test_the_kept_records_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts_module, "HANDOVER_MAX_RECORDS", 3)
    records = [_record(f"t{i}") for i in range(5)]
    paths = [r.dump(_path(tmp_path, f"r{i}"), hand_over=True) for i, r in enumerate(records)]

    handed = [RunArtifacts.load(p) is r for p, r in zip(paths, records, strict=True)]

    assert handed == [False, False, True, True, True]


def test_a_record_waiting_too_long_is_read_from_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(artifacts_module.time, "monotonic", lambda: clock[0])
    old = _record("old")
    old_path = old.dump(_path(tmp_path, "old"), hand_over=True)
    clock[0] += artifacts_module.HANDOVER_MAX_AGE_SECONDS + 1
    new = _record("new")
    new_path = new.dump(_path(tmp_path, "new"), hand_over=True)

    assert RunArtifacts.load(old_path) is not old
    assert RunArtifacts.load(new_path) is new
