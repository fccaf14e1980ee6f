"""The benchmarks' own metrics in the catalog equal the authors' functions on the same results: τ²'s pass^k
(`tau2.metrics.agent_metrics.compute_metrics`) and BFCL's accuracy (`save_eval_results`), each run in the
benchmark's own environment as a subprocess."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from eval_pipelines.benchmarks import environments
from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from tests.support.benchmark_warehouse import SyntheticRollout, write_sweep

SWEEP = "sweep-bench"


def upstream_python(name: str) -> str:
    """The benchmark's own interpreter: the project's cached environment, made on first use (or the interpreter
    EVAL_PIPELINES_BENCHMARK_PYTHON_<NAME> names)."""
    spec = importlib.import_module(f"eval_pipelines.benchmarks.{name}.adapter").ENVIRONMENT
    return str(environments.ensure(spec))


def run_upstream(name: str, script: str, payload: object) -> object:
    env = {"PATH": os.environ.get("PATH", ""), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": "/tmp"}
    done = subprocess.run(
        [upstream_python(name), "-I", "-c", textwrap.dedent(script)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


#: task -> outcomes of its trials; `error` trials are infrastructure errors that τ² drops before the metric.
#: t3 has 5 scored trials: k stops at the smallest count (4), and t3's ratios use n = 5.
TAU2_TRIALS: dict[str, list[str]] = {
    "tau2_airline_0": ["passed", "passed", "passed", "passed"],
    "tau2_airline_1": ["passed", "failed", "error", "passed", "passed"],
    "tau2_airline_2": ["failed", "failed", "failed", "error", "failed"],
    "tau2_airline_3": ["passed", "failed", "passed", "passed", "failed"],
    "tau2_airline_4": ["error", "passed", "passed", "failed", "passed"],
}

TAU2_SCRIPT = """
import json, sys
from types import SimpleNamespace
from tau2.data_model.simulation import Info, Results, RewardInfo, SimulationRun, TerminationReason
from tau2.data_model.tasks import Task
from tau2.metrics.agent_metrics import compute_metrics

trials = json.load(sys.stdin)
tasks = [
    Task.model_validate({"id": t, "user_scenario": {"instructions": "x"}, "evaluation_criteria": {"actions": []}})
    for t in trials
]
sims = [
    SimulationRun(
        id=f"{t}-{i}", task_id=t, start_time="", end_time="", duration=0.0,
        termination_reason=TerminationReason.USER_STOP, reward_info=RewardInfo(reward=r), messages=[], trial=i,
        agent_cost=0.0,
    )
    for t, rewards in trials.items() for i, r in enumerate(rewards)
]
who = SimpleNamespace(implementation="", llm="", llm_args={})
info = Info.model_construct(
    git_commit="", num_trials=max(len(r) for r in trials.values()), max_steps=1, max_errors=1, user_info=who,
    agent_info=who, environment_info=SimpleNamespace(domain_name="airline"), seed=0,
)
metrics = compute_metrics(Results.model_construct(info=info, tasks=tasks, simulations=sims, timestamp=""))
print(json.dumps({"pass_hat_ks": metrics.pass_hat_ks, "avg_reward": metrics.avg_reward}))
"""


def _tau2_rollouts(model_name: str, trials: dict[str, list[str]]) -> list[SyntheticRollout]:
    return [
        SyntheticRollout(f"{model_name}-{task_id}-{i}", "tau2_airline:26.3", task_id, outcome, model_name=model_name)
        for task_id, outcomes in trials.items()
        for i, outcome in enumerate(outcomes)
    ]


def test_tau2_pass_hat_k_equals_the_upstream_metric_function(tmp_path: Path) -> None:
    # A second model with other counts and a non-benchmark scenario share the warehouse: neither may leak in.
    other_model = {t: ["failed", "passed", "passed", "passed"] for t in TAU2_TRIALS}
    rollouts = [
        *_tau2_rollouts("gpt-x", TAU2_TRIALS),
        *_tau2_rollouts("gpt-y", other_model),
        SyntheticRollout("plain-1", "email:v1", "tau2_airline_0", "failed"),
    ]
    write_sweep(tmp_path / "wh", rollouts, benchmark_of={"tau2_airline:26.3": "tau2", "email:v1": None})
    build_catalog(tmp_path / "wh", tmp_path / "eval.duckdb")
    with connect_read_only(tmp_path / "eval.duckdb") as con:
        rows = con.execute(
            "select model_name, domain, k, pass_hat_k, avg_reward, n_errors, n_tasks from tau2_pass_hat_k "
            "where sweep_id = ? order by model_name, k",
            [SWEEP],
        ).fetchall()
    for model_name, trials in (("gpt-x", TAU2_TRIALS), ("gpt-y", other_model)):
        scored = {
            t: [1.0 if o == "passed" else 0.0 for o in outcomes if o != "error"] for t, outcomes in trials.items()
        }
        upstream = run_upstream("tau2", TAU2_SCRIPT, scored)
        assert isinstance(upstream, dict)
        mine = [r for r in rows if r[0] == model_name]
        assert [r[2] for r in mine] == [int(k) for k in upstream["pass_hat_ks"]] == [1, 2, 3, 4]
        for _, domain, k, value, avg_reward, n_errors, n_tasks in mine:
            assert domain == "airline"
            assert value == pytest.approx(upstream["pass_hat_ks"][str(k)], abs=1e-9)
            assert avg_reward == pytest.approx(upstream["avg_reward"], abs=1e-12)
            assert n_errors == sum(o == "error" for outcomes in trials.values() for o in outcomes)
            assert n_tasks == len(trials)


BFCL_SCRIPT = """
import ast, json, pathlib, sys, tempfile
import bfcl_eval.eval_checker as checker

# The helper module imports numpy and the whole handler stack at load, which the grading environment does not
# install; its aggregation function itself needs neither, so it is taken from the installed file and run as is.
path = pathlib.Path(checker.__file__).parent / "eval_runner_helper.py"
tree = ast.parse(path.read_text())
(function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "save_eval_results"]
scope = {
    "VERSION_PREFIX": "BFCL_v4",
    "get_directory_structure_by_category": lambda category: category,
    "write_list_of_dicts_to_file": lambda *args: None,
}
exec(compile(ast.Module(body=[function], type_ignores=[]), str(path), "exec"), scope)
out = {}
for category, outcomes in json.load(sys.stdin).items():
    model_result = [{"id": f"{category}_{i}"} for i in range(len(outcomes))]
    accuracy, total = scope["save_eval_results"]([], sum(outcomes), model_result, category, "m", pathlib.Path("."))
    out[category] = [accuracy, total]
print(json.dumps(out))
"""

#: category -> per entry: passed / failed / error (errors are never graded by BFCL: they are not in the total).
BFCL_ENTRIES: dict[str, list[str]] = {
    "multi_turn_base": ["passed", "failed", "passed", "error", "passed"],
    "multi_turn_miss_func": ["failed", "failed", "passed"],
    "multi_turn_long_context": ["error", "passed", "passed", "passed", "failed", "failed"],
}


def test_bfcl_accuracy_equals_the_upstream_aggregation(tmp_path: Path) -> None:
    rollouts = [
        SyntheticRollout(f"{category}-{i}", f"bfcl_{category}:2026.3.23", f"{category}_{i}", outcome)
        for category, outcomes in BFCL_ENTRIES.items()
        for i, outcome in enumerate(outcomes)
    ]
    write_sweep(tmp_path / "wh", rollouts, benchmark_of={f"bfcl_{c}:2026.3.23": "bfcl" for c in BFCL_ENTRIES})
    build_catalog(tmp_path / "wh", tmp_path / "eval.duckdb")
    with connect_read_only(tmp_path / "eval.duckdb") as con:
        rows = con.execute(
            "select category, accuracy, total, correct, n_errors from bfcl_accuracy where sweep_id = ? "
            "and model_name = 'gpt-x'",
            [SWEEP],
        ).fetchall()
    graded = {c: [int(o == "passed") for o in outcomes if o != "error"] for c, outcomes in BFCL_ENTRIES.items()}
    upstream = run_upstream("bfcl", BFCL_SCRIPT, graded)
    assert isinstance(upstream, dict)
    assert {r[0] for r in rows} == set(BFCL_ENTRIES)
    for category, accuracy, total, correct, n_errors in rows:
        assert accuracy == pytest.approx(upstream[category][0], abs=1e-12)
        assert total == upstream[category][1]
        assert correct == sum(graded[category])
        assert n_errors == BFCL_ENTRIES[category].count("error")
