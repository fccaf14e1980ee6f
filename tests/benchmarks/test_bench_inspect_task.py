"""The Inspect side of the overhead benchmark keeps only the live mailbox in a sample's `store()`.

Inspect snapshots the whole store around every span (solver, tool call, scorer) to record its changes, so a
second copy of the initial mailbox there would handicap Inspect in every figure the benchmark publishes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks._common import INSPECT_PYTHON, REPO_ROOT, run_json_child, write_bench_scenario
from benchmarks.overhead import inspect_environment

#: Run in the Inspect venv: the sample's store, its store events' paths, and the seeded (initial) mailbox.
READ_LOG = """
import json, sys
from pathlib import Path
from inspect_ai.log import StoreEvent, list_eval_logs, read_eval_log
sys.path.insert(0, ".")
from benchmarks.inspect_task import seeded_mailbox
log_dir, seed_dir, seed_names = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
(info,) = list_eval_logs(log_dir)
(sample,) = read_eval_log(info).samples
seeds = [json.loads((seed_dir / name).read_text()) for name in seed_names]
print(json.dumps({
    "store": sample.store,
    "store_paths": [c.path for e in sample.events if isinstance(e, StoreEvent) for c in e.changes],
    "initial": seeded_mailbox(seeds),
}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not INSPECT_PYTHON.is_file(), reason="benchmarks/.venv-inspect (inspect-ai) is not installed")
def test_inspect_task_store_holds_no_copy_of_the_initial_mailbox(tmp_path: Path) -> None:
    scenario = write_bench_scenario(tmp_path / "scenarios", 1)
    log_dir = tmp_path / "logs"
    command = [str(INSPECT_PYTHON), str(REPO_ROOT / "benchmarks" / "inspect_task.py"), "--scenario-dir",
               str(scenario.scenario_dir), "--samples", "1", "--warmup", "0", "--model", "mockllm", "--settings",
               "lean", "--log-dir", str(log_dir)]  # fmt: skip
    env = inspect_environment()

    result = run_json_child(command, timeout=300, env=env)

    assert (result["rollouts"], result["passed"]) == (1, 1)  # the verifier still passes the replayed actions
    assert result["inspect"]["store_keys"] == ["mailbox"]
    task = json.loads(next((scenario.scenario_dir / "tasks").glob("*.json")).read_text())
    read = subprocess.run(
        [str(INSPECT_PYTHON), "-c", READ_LOG, str(log_dir / "timed"), str(scenario.scenario_dir / "seed_data"),
         json.dumps(task["seed_data"]["email"])],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    logged = json.loads(read.stdout)
    (mailbox,) = logged["store"].values()
    initial = logged["initial"]
    assert list(logged["store"]) == ["mailbox"]
    # The store's mailbox is the live one: the seeded emails plus the two the agent sent.
    assert set(mailbox["emails"]) - set(initial["emails"]) == {"sent-0001", "sent-0002"}
    assert all(mailbox["emails"][key] == email for key, email in initial["emails"].items())
    # Every change Inspect recorded to the store was to that mailbox.
    assert logged["store_paths"] and all(path.startswith("/mailbox") for path in logged["store_paths"])
