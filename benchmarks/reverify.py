"""Re-verification benchmark: re-score 10,000 stored rollouts of the built-in scenarios, with no agent and no model.

    .venv/bin/python benchmarks/reverify.py                   # 10,000 rollouts; target >= 500 rollouts/s

The stored rollouts are made the way the pipeline stores them: each task is replayed once per variant against
the real built-in tool servers (reference actions, no actions, and perturbed reference actions), and the
resulting traces are cloned under new rollout ids into `traces/model=<m>/scenario=<s>/<rollout_id>.json.zst`
(`RunArtifacts.dump`: compressed, as the service stores them) plus one `rollouts` Parquet file per partition
(three partitions per scenario: an oracle-like, a no-op and a noisy model). Then
`pipeline.steps.verify_partition` re-verifies every partition, timed in a fresh child process so its peak RSS is
the verification's alone. The same rollouts are also re-verified through the isolated worker
(`verifiers.isolation`), the path for untrusted bundles.

Results: JSON on stdout and in `benchmarks/results/reverify.{json,md}` (git-ignored), plus one Markdown line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import httpx

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles, default_scenarios_dir, partition_key
from eval_pipelines.pipeline.steps import trace_path, verify_partition
from eval_pipelines.schemas.artifacts import META_STATE, META_STATE_DIFFS, STORED_ARTIFACTS_SUFFIX, RunArtifacts
from eval_pipelines.schemas.runs import Rollout, RolloutStatus
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.schemas.tools import DiffScope, ToolCall, ToolCallResult
from eval_pipelines.sim.endpoint import WRONG_ADDRESS
from eval_pipelines.toolservers.diff import diff_states
from eval_pipelines.toolservers.host import BUILTIN_SERVERS, ToolServerHost
from eval_pipelines.verifiers.isolation import VerifyJob, run_in_process
from eval_pipelines.verifiers.loader import load_verifier_package
from eval_pipelines.warehouse.rows import RolloutContext, rollout_tables
from eval_pipelines.warehouse.store import Warehouse

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TARGET_ROLLOUTS_PER_SECOND = 500.0
SWEEP_ID = "bench-reverify"
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")

Action = tuple[str, str, dict[str, Any]]  # (tool_server, tool_name, parameters)

REFERENCE, NOOP, PERTURBED = "reference", "noop", "perturbed"
#: model name -> the variants its rollouts cycle through (the noisy model mixes all three).
MODELS: dict[str, tuple[str, ...]] = {
    "sim-oracle": (REFERENCE,),
    "sim-noop": (NOOP,),
    "sim-noisy": (REFERENCE, PERTURBED, REFERENCE, NOOP, PERTURBED),
}


# --- replay ---------------------------------------------------------------------------------------------------


def reference_actions(task: Task) -> list[Action]:
    return [(a.tool_server, a.tool_name, dict(a.parameters)) for a in task.reference_actions]


def perturbed_actions(task: Task) -> list[Action]:
    """The reference actions with the first recipient replaced by a stranger (else the last action dropped)."""
    actions = reference_actions(task)
    for _, _, params in actions:
        for name, value in params.items():
            if not isinstance(value, str):
                continue
            for address in (part.strip() for part in value.split(",")):
                if _EMAIL.match(address):
                    params[name] = value.replace(address, WRONG_ADDRESS, 1)
                    return actions
    return actions[:-1]


def replay(
    http: httpx.Client, host: ToolServerHost, scenario: ScenarioFiles, task: Task, actions: Sequence[Action]
) -> RunArtifacts:
    """Run `actions` against fresh seeded workspaces and record them as the engine would: messages, tool calls,
    per-call diffs, the initial/final state and one whole-rollout (`full`) diff per tool server."""
    servers = [s.name for s in task.tool_servers] or [s.name for s in scenario.template.tool_servers]
    workspaces: dict[str, str] = {}
    initial: dict[str, Any] = {}
    for server in servers:
        base = host.base_url(server)
        created = http.post(f"{base}/workspaces", json={"seed": scenario.seed_payload(task, server)})
        created.raise_for_status()
        workspaces[server] = f"{base}{created.json()['path']}"
        initial[server] = http.get(f"{workspaces[server]}/snapshot").json()["state"]
    artifacts = RunArtifacts(task_id=task.task_id, task=task.description, model="replay", provider="custom")
    artifacts.record_message("user", task.description)
    diffs: list[dict[str, Any]] = []
    try:
        for index, (server, tool, params) in enumerate(actions):
            body = http.post(
                f"{workspaces[server]}/step", json={"action": {"tool_name": tool, "parameters": params}}
            ).json()
            call_id = f"call_{index}"
            function = {"name": f"{server}__{tool}", "arguments": json.dumps(params)}
            wire = {"id": call_id, "type": "function", "function": function}
            artifacts.record_message("assistant", None, tool_calls=[wire])
            artifacts.record_message("tool", body["observation"], tool_call_id=call_id, name=f"{server}__{tool}")
            if body.get("state_diff"):
                diffs.append({**body["state_diff"], "step_index": index, "tool_name": tool})
            artifacts.record_tool_call(
                ToolCall(tool_server=server, tool_name=tool, parameters=params),
                ToolCallResult(observation=body["observation"], is_error=bool(body.get("is_error"))),
            )
        final_text = task.reference_answer if actions else "I am unable to complete this task."
        artifacts.record_message("assistant", final_text)
        artifacts.set_final_observation(final_text)
        state: dict[str, Any] = {}
        for server, url in workspaces.items():
            final = http.get(f"{url}/snapshot").json()["state"]
            state[server] = {"initial": initial[server], "final": final}
            diffs.append(diff_states(server, initial[server], final, DiffScope.FULL).model_dump(mode="json"))
    finally:
        for url in workspaces.values():
            http.delete(url)
    artifacts.metadata[META_STATE] = state
    artifacts.metadata[META_STATE_DIFFS] = diffs
    return artifacts


def variant_actions(task: Task, variant: str) -> list[Action]:
    return {REFERENCE: reference_actions, NOOP: lambda _: [], PERTURBED: perturbed_actions}[variant](task)


def replay_variants(scenarios: Sequence[ScenarioFiles]) -> dict[tuple[str, str, str], RunArtifacts]:
    """(scenario_id, task_id, variant) -> the replayed trace."""
    needed = sorted({s.name for scenario in scenarios for s in scenario.template.tool_servers})
    traces: dict[tuple[str, str, str], RunArtifacts] = {}
    with ToolServerHost(needed) as host, httpx.Client(timeout=30) as http:
        for scenario in scenarios:
            for task in scenario.tasks().values():
                for variant in (REFERENCE, NOOP, PERTURBED):
                    artifacts = replay(http, host, scenario, task, variant_actions(task, variant))
                    traces[(scenario.scenario_id, task.task_id, variant)] = artifacts
    return traces


# --- the stored rollouts --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Partition:
    model: str
    scenario_id: str
    rollouts: int

    @property
    def model_key(self) -> str:
        return partition_key(self.model)

    @property
    def scenario_key(self) -> str:
        return partition_key(self.scenario_id)


def plan(scenarios: Sequence[ScenarioFiles], total: int) -> list[Partition]:
    cells = [(model, s.scenario_id) for s in scenarios for model in MODELS]
    share, extra = divmod(total, len(cells))
    return [Partition(model, sid, share + (1 if i < extra else 0)) for i, (model, sid) in enumerate(cells)]


def write_rollouts(root: Path, scenarios: Sequence[ScenarioFiles], total: int) -> list[Partition]:
    """Clone the replayed traces into `total` stored rollouts, written as the `rollouts` step writes them."""
    by_id = {s.scenario_id: s for s in scenarios}
    traces = replay_variants(scenarios)
    warehouse = Warehouse(root / "warehouse")
    traces_root = root / "traces"
    partitions = plan(scenarios, total)
    now = dt.datetime.now(dt.UTC).isoformat()
    for part in partitions:
        task_ids = sorted(by_id[part.scenario_id].tasks())
        variants = MODELS[part.model]
        run_id = f"run-{part.model_key}-{part.scenario_key}"
        ctx = RolloutContext(SWEEP_ID, run_id, part.model_key, part.scenario_key, part.model, True)
        rows: list[tuple[Rollout, RunArtifacts | None, str | None]] = []
        for index in range(part.rollouts):
            task_id = task_ids[index % len(task_ids)]
            variant = variants[(index // len(task_ids)) % len(variants)]
            rollout_id = f"{part.model_key}-{part.scenario_key}-{index:06d}"
            path = traces[(part.scenario_id, task_id, variant)].dump(
                trace_path(traces_root, part.model_key, part.scenario_key, rollout_id)
            )
            rollout = Rollout(
                rollout_id=rollout_id,
                scenario_id=part.scenario_id,
                task_id=task_id,
                run_id=run_id,
                rollout_index=index // len(task_ids),
                status=RolloutStatus.COMPLETED,
                created_at=now,
                completed_at=now,
            )
            rows.append((rollout, None, str(path)))
        table = rollout_tables(ctx, rows)["rollouts"]
        warehouse.write("rollouts", table, model_key=part.model_key, scenario_key=part.scenario_key, file_stem=run_id)
    return partitions


# --- timed re-verification (each in a fresh child process) ----------------------------------------------------


def _peak_rss_mib() -> float:
    """This process's peak resident set size, MiB (Linux reports KiB). RUSAGE_CHILDREN would count the parent's
    pages of a forked-then-exec'd worker, so the worker reports its own peak instead."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _verify_in_process(warehouse: Warehouse, scenario: ScenarioFiles, model_key: str, scenario_key: str) -> int:
    """The same verdicts with the verifiers imported into this process (no containment): the baseline that shows
    what the contained path, `verify_partition`, costs. Writes nothing."""
    columns = ("rollout_id", "task_id", "artifacts_path")
    rows = warehouse.partition_rows("rollouts", model_key=model_key, scenario_key=scenario_key, columns=columns)
    tasks = scenario.tasks()
    jobs = [
        VerifyJob(Path(r["artifacts_path"]), tuple(tasks[r["task_id"]].verifiers))
        for r in rows
        if r["artifacts_path"] and r["task_id"] in tasks
    ]
    outcomes = run_in_process(load_verifier_package(scenario.verifiers_dir), jobs)
    return sum(1 for row_outcomes in outcomes if row_outcomes and all(o.success for o in row_outcomes))


def measure(
    mode: str, root: str, scenarios_dir: str, scenario_ids: list[str], partitions: list[tuple[str, str]]
) -> dict[str, Any]:
    """Runs in a fresh child process: re-verify every partition and report time, counts and peak RSS."""
    catalog = ScenarioCatalog(Path(scenarios_dir))
    warehouse = Warehouse(Path(root) / "warehouse")
    by_key = {s.key: s for s in (catalog.get(scenario_id) for scenario_id in scenario_ids)}
    for scenario in by_key.values():
        scenario.tasks()  # parsing the task files is setup, not re-verification
    baseline_rss = _peak_rss_mib()
    verified = passed = 0
    worker_peak_kib = 0
    started = time.perf_counter()
    for model_key, scenario_key in partitions:
        scenario = by_key[scenario_key]
        if mode == "isolated":
            summary = verify_partition(warehouse, scenario, model_key, scenario_key)
            verified += summary.rollouts_verified
            passed += summary.passed
        else:
            verified += len(
                warehouse.partition_rows(
                    "rollouts", model_key=model_key, scenario_key=scenario_key, columns=("rollout_id",)
                )
            )
            passed += _verify_in_process(warehouse, scenario, model_key, scenario_key)
    seconds = time.perf_counter() - started
    own = _peak_rss_mib()
    return {
        "mode": mode,
        "rollouts_verified": verified,
        "passed": passed,
        "seconds": round(seconds, 3),
        "rollouts_per_second": round(verified / seconds, 1) if seconds else None,
        "peak_rss_mib": own,
        "rss_before_verifying_mib": baseline_rss,
        "peak_rss_worker_mib": round(worker_peak_kib / 1024, 1) if worker_peak_kib else None,
    }


def _in_child(function: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def replayable(catalog: ScenarioCatalog) -> tuple[list[ScenarioFiles], dict[str, str]]:
    """The scenarios whose tool servers are all built in (they can be replayed here), and why others are not."""
    usable: list[ScenarioFiles] = []
    skipped: dict[str, str] = {}
    for scenario in catalog.all():
        missing = sorted({s.name for s in scenario.template.tool_servers} - set(BUILTIN_SERVERS))
        if missing:
            skipped[scenario.scenario_id] = f"tool server(s) {missing} are not built in"
        elif not (scenario.verifiers_dir / "__init__.py").is_file():
            skipped[scenario.scenario_id] = "no verifier package"
        else:
            usable.append(scenario)
    return usable, skipped


def run(total: int, workdir: Path, scenarios_dir: Path, modes: Sequence[str]) -> dict[str, Any]:
    scenarios, skipped = replayable(ScenarioCatalog(scenarios_dir))
    if not scenarios:
        raise SystemExit(f"no replayable scenario under {scenarios_dir}: {skipped}")
    started = time.perf_counter()
    partitions = write_rollouts(workdir, scenarios, total)
    generated = time.perf_counter() - started
    keys = [(p.model_key, p.scenario_key) for p in partitions]
    trace_bytes = sum(p.stat().st_size for p in (workdir / "traces").rglob(f"*{STORED_ARTIFACTS_SUFFIX}"))
    ids = [s.scenario_id for s in scenarios]
    results = {mode: _in_child(measure, mode, str(workdir), str(scenarios_dir), ids, keys) for mode in modes}
    return {
        "benchmark": "reverify",
        "rollouts": total,
        "scenarios": [s.scenario_id for s in scenarios],
        "scenarios_skipped": skipped,
        "partitions": [{"model": p.model, "scenario_id": p.scenario_id, "rollouts": p.rollouts} for p in partitions],
        "trace_mib": round(trace_bytes / 2**20, 1),
        "generate_seconds": round(generated, 2),
        "target_rollouts_per_second": TARGET_ROLLOUTS_PER_SECOND,
        "results": results,
        "machine": {"python": platform.python_version(), "cpus": _cpu_count(), "platform": platform.platform()},
        "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def markdown(report: dict[str, Any]) -> str:
    lines = []
    for mode, result in report["results"].items():
        verdict = "meets" if result["rollouts_per_second"] >= TARGET_ROLLOUTS_PER_SECOND else "MISSES"
        worker = f", worker peak RSS {result['peak_rss_worker_mib']} MiB" if result["peak_rss_worker_mib"] else ""
        lines.append(
            f"| re-verify {result['rollouts_verified']:,} rollouts ({mode}) | {result['seconds']} s | "
            f"**{result['rollouts_per_second']:,} rollouts/s** ({verdict} the {TARGET_ROLLOUTS_PER_SECOND:g}/s "
            f"target) | peak RSS {result['peak_rss_mib']} MiB{worker} | {result['passed']:,} passed |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--modes", nargs="+", default=["in_process", "isolated"], choices=["in_process", "isolated"])
    parser.add_argument("--scenarios-dir", type=Path, default=default_scenarios_dir())
    parser.add_argument("--workdir", type=Path, default=None, help="keep the generated rollouts here")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where reverify.{json,md} go ('' = nowhere)")
    args = parser.parse_args(argv)
    if args.rollouts < 1:
        parser.error("--rollouts must be at least 1")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ep-reverify-"))
    try:
        report = run(args.rollouts, workdir, args.scenarios_dir, args.modes)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(report, indent=2)
    print(text)
    print(markdown(report))
    if str(args.out):
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "reverify.json").write_text(text + "\n", encoding="utf-8")
        (args.out / "reverify.md").write_text(markdown(report) + "\n", encoding="utf-8")
    met = all(r["rollouts_per_second"] >= TARGET_ROLLOUTS_PER_SECOND for r in report["results"].values())
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
