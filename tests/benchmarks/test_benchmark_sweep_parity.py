"""The whole path a user takes, through the CLI: a sweep of the simulated oracle and noisy models over every BFCL
multi-turn category and τ² airline and retail (the first tasks of each, as `limit` takes them), then
`eval-pipelines parity`. The oracle passes every task, the noisy model fails some, and the upstream graders agree
with every verdict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.reliability.support_runs import make_dagster_home

pytestmark = pytest.mark.slow

FAMILIES = (
    "bfcl_multi_turn_base",
    "bfcl_multi_turn_miss_func",
    "bfcl_multi_turn_miss_param",
    "bfcl_multi_turn_long_context",
    "tau2_airline",
    "tau2_retail",
)
LIMIT = 2
ROLLOUTS = 2
SWEEP_ID = "bench-parity"


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eval_pipelines.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_oracle_passes_every_benchmark_task_and_parity_agrees(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "sweeps").mkdir(parents=True)
    entries = "".join(f"  - {{id: {family}, limit: {LIMIT}}}\n" for family in FAMILIES)
    (project / "sweeps" / "bench.yaml").write_text(
        "name: bench\nscenarios:\n" + entries + "models:\n"
        "  - {name: sim-oracle, model: sim-oracle, base_url: sim://local}\n"
        "  - {name: sim-noisy, model: sim-noisy, base_url: sim://local}\n"
        f"rollout_count: {ROLLOUTS}\n",
        encoding="utf-8",
    )
    data = tmp_path / "data"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(make_dagster_home(tmp_path / "dagster_home")),
        "EVAL_PIPELINES_DATA_DIR": str(data),
        "EVAL_PIPELINES_PROJECT_DIR": str(project),
    }
    swept = _cli(["sweep", "--config", "sweeps/bench.yaml", "--skip-assessment", "--sweep-id", SWEEP_ID], env, project)
    assert swept.returncode == 0, swept.stderr[-3000:]
    parity = _cli(["parity", "--sweep", SWEEP_ID], env, project)
    assert parity.returncode == 0, parity.stdout + parity.stderr[-3000:]
    assert "Traceback" not in swept.stderr + parity.stderr

    con = duckdb.connect(str(data / "eval.duckdb"), read_only=True)
    try:
        rates = con.execute(
            "select scenario_id, model_name, n, n_errors, pass_rate from scenario_model_metrics where sweep_id = ?",
            [SWEEP_ID],
        ).fetchall()
        agreement = con.execute(
            "select benchmark, count(*), count(*) filter (where agree), count(*) filter (where upstream) "
            "from parity where sweep_id = ? group by benchmark order by benchmark",
            [SWEEP_ID],
        ).fetchall()
    finally:
        con.close()
    per_pair = LIMIT * ROLLOUTS
    oracle = {scenario: (n, errors, rate) for scenario, model, n, errors, rate in rates if model == "sim-oracle"}
    assert sorted(s.partition(":")[0] for s in oracle) == sorted(FAMILIES)
    assert set(oracle.values()) == {(per_pair, 0, 1.0)}, oracle
    noisy = [rate for _, model, _, _, rate in rates if model == "sim-noisy"]
    assert min(noisy) < 1.0, "the noisy model should fail some tasks, so parity is checked on failures too"
    bfcl_rollouts = 4 * per_pair * 2
    tau2_rollouts = 2 * per_pair * 2
    assert [(b, n, agree) for b, n, agree, _ in agreement] == [
        ("bfcl", bfcl_rollouts, bfcl_rollouts),
        ("tau2", tau2_rollouts, tau2_rollouts),
    ]
    # Parity is checked on passes and failures alike: upstream passed some BFCL rollouts and failed others.
    [(_, n_bfcl, _, bfcl_upstream_passes)] = [row for row in agreement if row[0] == "bfcl"]
    assert 0 < bfcl_upstream_passes < n_bfcl
