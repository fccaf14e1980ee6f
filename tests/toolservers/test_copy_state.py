"""copy_state: the copy a workspace takes before every mutating call, to diff it and to roll it back."""

from __future__ import annotations

from pathlib import Path

from eval_pipelines.toolservers.base import copy_state
from eval_pipelines.toolservers.files import FilesState, WorkspaceDirectory


def test_a_copy_shares_nothing_mutable_with_its_original() -> None:
    state = {"emails": {"e-1": {"to": ["a@x.test"], "meta": {"read": False}, "size": 1.5, "id": None}}}
    copied = copy_state(state)
    assert copied == state
    copied["emails"]["e-1"]["to"].append("b@x.test")
    copied["emails"]["e-1"]["meta"]["read"] = True
    copied["emails"]["e-2"] = {}
    assert state == {"emails": {"e-1": {"to": ["a@x.test"], "meta": {"read": False}, "size": 1.5, "id": None}}}


def test_other_types_keep_their_own_deep_copy(tmp_path: Path) -> None:
    directory = WorkspaceDirectory(tmp_path)
    files = FilesState(directory, {"files": {"a.txt": {"size": 1}}})
    tags = {1, 2}
    copied = copy_state({"tags": {"t": {"set": tags}}, "files": files})
    assert type(copied["files"]) is FilesState
    assert copied["files"].directory is directory  # FilesState's copies share their directory
    assert copied["files"] == files and copied["files"]["files"] is not files["files"]
    assert copied["tags"]["t"]["set"] == tags and copied["tags"]["t"]["set"] is not tags
