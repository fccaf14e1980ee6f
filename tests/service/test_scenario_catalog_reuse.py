"""The service's catalog keeps what it loaded of an unchanged scenario across refreshes, and re-reads a changed one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.service.catalog import ReusingScenarioCatalog, folder_fingerprint

EMAIL_OPS = "email_ops:1.0.0"


def _catalog(tmp_path: Path) -> tuple[ReusingScenarioCatalog, Path]:
    root = tmp_path / "scenarios"
    shutil.copytree(builtin_scenarios_dir() / "email_ops", root / "email_ops")
    return ReusingScenarioCatalog(root), root / "email_ops"


def test_an_unchanged_scenario_keeps_its_loaded_files_across_refreshes(tmp_path: Path) -> None:
    catalog, _ = _catalog(tmp_path)
    loaded = catalog.get(EMAIL_OPS)
    tasks = loaded.tasks()
    catalog.refresh()
    assert catalog.get(EMAIL_OPS) is loaded and catalog.get(EMAIL_OPS).tasks() is tasks


def test_a_task_edited_in_place_is_read_again(tmp_path: Path) -> None:
    catalog, folder = _catalog(tmp_path)
    loaded = catalog.get(EMAIL_OPS)
    task_path = sorted((folder / "tasks").glob("*.json"))[0]
    task_id = json.loads(task_path.read_text())["task_id"]
    raw = json.loads(task_path.read_text())
    raw["description"] = "A task edited while the service runs."
    task_path.write_text(json.dumps(raw))
    os.utime(task_path, ns=(1, 1))  # a different modification time however fast the edit came
    catalog.refresh()
    refreshed = catalog.get(EMAIL_OPS)
    assert refreshed is not loaded
    assert refreshed.tasks()[task_id].description == "A task edited while the service runs."


def test_a_scenario_added_or_removed_shows_in_the_next_refresh(tmp_path: Path) -> None:
    catalog, folder = _catalog(tmp_path)
    shutil.rmtree(folder)
    catalog.refresh()
    assert catalog.ids() == []
    shutil.copytree(builtin_scenarios_dir() / "email_ops", folder)
    catalog.refresh()
    assert catalog.ids() == [EMAIL_OPS] and len(catalog.get(EMAIL_OPS).tasks()) > 0


def test_the_fingerprint_sees_a_file_replaced_by_rename_added_or_removed(tmp_path: Path) -> None:
    folder = tmp_path / "scenario"
    (folder / "tasks").mkdir(parents=True)
    (folder / "tasks" / "a.json").write_text("{}")
    before = folder_fingerprint(folder)
    assert folder_fingerprint(folder) == before
    replacement = folder / "tasks" / ".a.json.new"
    replacement.write_text("{}")
    stat = (folder / "tasks" / "a.json").stat()
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    replacement.rename(folder / "tasks" / "a.json")  # same size and time, a new inode
    assert folder_fingerprint(folder) != before
    replaced = folder_fingerprint(folder)
    (folder / "tasks" / "b.json").write_text("{}")
    added = folder_fingerprint(folder)
    assert added != replaced
    (folder / "tasks" / "b.json").unlink()
    assert folder_fingerprint(folder) != added
