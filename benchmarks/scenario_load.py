"""Scenario load: the CPU a process spends reading and checking a large scenario's tasks before its first rollout.

    .venv/bin/python benchmarks/scenario_load.py                          # 3,000 tasks, 5 repetitions
    .venv/bin/python benchmarks/scenario_load.py --against /path/to/other/checkout

Every process that runs rollouts loads the scenario's tasks first (the runner, each rollout worker, the
simulated endpoint), so a worker's share of a run starts only after it; a materialised benchmark has thousands
of tasks. The scenario is the benchmark task (`write_bench_scenario`: copies of one built-in task) at `--tasks`
copies, in two shapes: every task naming the same seed files and verifier (as a generated scenario's tasks may),
and every task with seed files of its own in one flat `seed_data/` (as BFCL and τ²-bench materialise). Each
repetition loads a shape in a fresh interpreter (imports apart) and reports the CPU seconds of
`ScenarioFiles.tasks()`; the child says which package it imported, and a reading from the wrong tree is refused.
With `--against`, the other checkout (its `eval_pipelines` first on `PYTHONPATH`) loads the same folder in every
repetition too, the order alternating.

Results: JSON on stdout and in `benchmarks/results/scenario_load.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import (
    RESULTS_DIR,
    command_line,
    load_average,
    machine,
    now_iso,
    run_json_child,
    write_bench_scenario,
    write_report,
)

DEFAULT_TASKS = 3000
DEFAULT_REPEATS = 5
CHILD_TIMEOUT_SECONDS = 600.0


#: What a fresh interpreter runs, with `-P`: neither this file's checkout nor the working directory then comes
#: before `--against`'s tree on `sys.path`.
CHILD_CODE = """
import json, sys, time
from pathlib import Path
from eval_pipelines.inputs.scenarios import ScenarioCatalog
catalog = ScenarioCatalog(Path(sys.argv[1]))
scenario = next(catalog.get(i) for i in catalog.ids() if i.startswith("bench_email"))
cpu = time.process_time()
tasks = scenario.tasks()
print(json.dumps({"tasks": len(tasks), "cpu_seconds": round(time.process_time() - cpu, 4),
                  "package": str(Path(sys.modules["eval_pipelines"].__file__).parent)}))
"""


def load_once(scenarios_dir: Path, tree: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    reading = run_json_child(
        [sys.executable, "-P", "-c", CHILD_CODE, str(scenarios_dir)], timeout=CHILD_TIMEOUT_SECONDS, env=env
    )
    expected = (tree or Path(__file__).resolve().parents[1]) / "eval_pipelines"
    if Path(reading["package"]).resolve() != expected.resolve():
        raise RuntimeError(f"the child imported {reading['package']}, not {expected}")
    return reading


SHAPES = ("shared seeds", "a seed per task")


def write_scenario(folder: Path, task_count: int, shape: str) -> Path:
    """The benchmark scenario in one of `SHAPES`; returns its catalog folder."""
    scenario = write_bench_scenario(folder, task_count)
    if shape == SHAPES[1]:
        seeds = scenario.scenario_dir / "seed_data"
        shared = {path.name: path.read_bytes() for path in seeds.iterdir()}
        for task_path in sorted((scenario.scenario_dir / "tasks").glob("*.json")):
            task = json.loads(task_path.read_text(encoding="utf-8"))
            own = {
                server: [f"{task['task_id']}_{name}" for name in names] for server, names in task["seed_data"].items()
            }
            for names, own_names in zip(task["seed_data"].values(), own.values(), strict=True):
                for name, own_name in zip(names, own_names, strict=True):
                    (seeds / own_name).write_bytes(shared[name])
            task_path.write_text(json.dumps(task | {"seed_data": own}), encoding="utf-8")
    return scenario.scenarios_dir


def measure(task_count: int, repeats: int, against: Path | None, workdir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for shape in SHAPES:
        scenarios_dir = write_scenario(workdir / shape.replace(" ", "-"), task_count, shape)
        sides: dict[str, list[dict[str, Any]]] = {"this": []} | ({"against": []} if against else {})
        for repetition in range(repeats):
            order = list(sides) if repetition % 2 == 0 else list(reversed(sides))
            for side in order:
                reading = load_once(scenarios_dir, against if side == "against" else None)
                sides[side].append(reading | {"load": load_average()})
        results[shape] = {
            side: {
                "tasks": readings[0]["tasks"],
                "cpu_seconds_median": round(statistics.median(r["cpu_seconds"] for r in readings), 3),
                "cpu_seconds": [r["cpu_seconds"] for r in readings],
                "loads": [r["load"][0] for r in readings],
            }
            for side, readings in sides.items()
        }
    return results


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Scenario load (`{report['command']}`; {report['tasks']} tasks, load {report['load_average_before'][0]} -> "
        f"{report['load_average_after'][0]} on {report['machine']['cpus']} CPUs, at "
        f"{report['machine']['git_revision']})",
        "",
        "| tasks' seed files | side | CPU s (median) | repetitions | ms per task |",
        "|---|---|---|---|---|",
    ]
    for shape, by_side in report["results"].items():
        for side, result in by_side.items():
            name = "this checkout" if side == "this" else f"`{report['against']}`"
            per_task = 1000 * result["cpu_seconds_median"] / max(result["tasks"], 1)
            lines.append(
                f"| {shape} | {name} | {result['cpu_seconds_median']} | {', '.join(map(str, result['cpu_seconds']))} "
                f"| {per_task:.3f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=DEFAULT_TASKS)
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    parser.add_argument("--against", type=Path, help="another checkout, measured alternately on the same folder")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where scenario_load.{json,md} go ('' = nowhere)")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.repeats < 1:
        parser.error("--tasks and --repeats must be at least 1")
    if args.against is not None and not (args.against / "eval_pipelines").is_dir():
        parser.error(f"--against: {args.against} holds no eval_pipelines package")
    workdir = Path(tempfile.mkdtemp(prefix="ep-scenario-load-"))
    load_before = load_average()
    try:
        results = measure(args.tasks, args.repeats, args.against, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report = {
        "benchmark": "scenario_load",
        "command": command_line(),
        "tasks": args.tasks,
        "against": str(args.against) if args.against else None,
        "results": results,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine(),
        "measured_at": now_iso(),
    }
    write_report("scenario_load", report, markdown(report), Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
