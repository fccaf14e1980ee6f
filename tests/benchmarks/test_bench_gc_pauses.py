"""The collector-pause benchmark's harness, in --quick sizes: every generation's collections are timed in a fresh
runner process, and that process keeps its start-up objects out of the collector's scans while it runs rollouts."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import gc_pauses


def test_collections_are_timed_and_the_runner_s_start_up_objects_are_frozen(tmp_path: Path) -> None:
    # A process running rollouts raises the gen-0 threshold to 20,000 net allocations, so a handful of rollouts
    # may never trigger a collection: 120 give a few (4 on this machine), enough to see them timed.
    assert gc_pauses.main(["--rollouts", "120", "--repeats", "1", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "gc_pauses.json").read_text(encoding="utf-8"))
    [run] = data["runs"]
    assert run["passed"] == run["rollouts"] == 120
    assert set(run["collections"]) == {"0", "1", "2"} and run["collections"]["0"] > 0
    # The embedded service's loop runs the rollouts with what start-up built frozen: far more than is left tracked.
    assert run["objects_frozen"] > run["objects_tracked"] > 0
    assert "| 1 |" in (tmp_path / "gc_pauses.md").read_text(encoding="utf-8")
