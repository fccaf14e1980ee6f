"""Orchestration overhead versus Inspect AI, side by side in one run on the same machine.

    .venv/bin/python benchmarks/overhead.py                  # 200 x 1 (add 100x5 for epochs), 5 paired repetitions

Targets, every one held at every size: ours at least 3x the throughput of Inspect's lean in-process mockllm
(its fastest configuration); at most 12 CPU-ms and 15,000 bytes on disk per rollout.

The task on every side: a copy of email_ops_011 (5 tool calls, then a final answer), scored by the scenario's
own state verifier, against a zero-latency model.

- **ours**: the `rollouts` asset's path without Dagster (`pipeline.steps.run_and_collect` on the embedded
  service): SQLite run store, RolloutEngine with workspaces on the real built-in email server over HTTP, the
  reference agent, state snapshots and diffs, verifiers, artifacts JSON, traces and Parquet rows. N samples x k
  epochs = N tasks x rollout_count k.
- **inspect-openai**: Inspect's `eval()` at its *default* settings (`benchmarks/inspect_task.py`, settings
  "default": nothing passed beyond the task, model, epochs, concurrency and log folder; so the rich console
  display, realtime sample logging, the control-channel server and the running score display are all on), with
  `@tool` functions over a per-sample mailbox, the same verifier as the scorer, and Inspect's OpenAI-compatible
  provider pointed at the *same* endpoint process as ours.
- **inspect-openai-lean**: the same, with every overhead switch Inspect offers turned off (settings "lean":
  `log_realtime=False`, `display="none"`, `ctl_server=False`, `score_display=False`): the same transport as
  ours, Inspect at its best settings.
- **inspect-mockllm-lean**: the lean settings on Inspect's in-process `mockllm`, with usage given explicitly so
  it counts no tokens: no model HTTP at all, which our side always makes. Inspect's fastest configuration, so
  the throughput target is held against it.

On every Inspect side the sample `store()` holds the live mailbox only (the initial one is in the scorer's
closure): Inspect snapshots the whole store around every span, so a second copy there would slow Inspect down
for a reason of this benchmark's making. Each Inspect side reports the store keys its samples left, read back
from its log.

Paired alternation: every repetition runs every side once, back to back, ours next to the headline side, and
the order flips from one repetition to the next (ours first, then ours last), so a change in the machine's load
(it is shared) falls on both members of a pair alike. Each ratio is computed per repetition (ours against that
repetition's run of the other side) and reported as the median of those per-pair ratios with their min and max;
the per-side figures are medians over the repetitions. The 1-minute load average is recorded before, after and
at the end of every run.

Every Inspect side records the eval() arguments it passed and the settings Inspect resolved from them (read back
from Inspect) in the JSON, and the Markdown lists them. The Inspect children run with `INSPECT_*` variables
cleared from their environment, so "default" means Inspect's defaults, not this machine's.

The endpoint (sim-oracle, zero latency) is a separate process; its CPU is reported on its own line. Each side
runs in a fresh child process (imports and a 2-rollout warm-up are not timed) at the same concurrency (ours:
max_parallel; Inspect: max_samples = max_connections). CPU = user + system time of the side's whole process
tree: for ours, the runner (all threads), any rollout workers and the tool-server process; for Inspect, its
process (its tools are in-process Python functions). Bytes per rollout = what the timed run left on disk, per
rollout: for ours the data folder's growth (run store, artifacts, traces, Parquet); for Inspect its log folder
(the `.eval` log). Inspect's own data folder (its trace log; the realtime buffer, deleted at the end) is not
counted. Inspect AI lives in `benchmarks/.venv-inspect` (it pins packages differently from this project):

    python3.11 -m venv benchmarks/.venv-inspect
    benchmarks/.venv-inspect/bin/pip install -r benchmarks/requirements-inspect.txt

Results: JSON on stdout and in `benchmarks/results/overhead.{json,md}` (git-ignored).
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
    INSPECT_PYTHON,
    RESULTS_DIR,
    ModelEndpoint,
    OurPipeline,
    command_line,
    load_average,
    machine,
    now_iso,
    peak_rss_mib,
    run_child,
    run_json_child,
    write_bench_scenario,
    write_report,
)

OURS = "ours"
INSPECT_OPENAI = "inspect-openai"
INSPECT_OPENAI_LEAN = "inspect-openai-lean"
INSPECT_MOCKLLM_LEAN = "inspect-mockllm-lean"
#: Inspect side -> (`inspect_task.py --model`, `--settings`).
INSPECT_SIDES: dict[str, tuple[str, str]] = {
    INSPECT_OPENAI: ("openai", "default"),
    INSPECT_OPENAI_LEAN: ("openai", "lean"),
    INSPECT_MOCKLLM_LEAN: ("mockllm", "lean"),
}
SIDES = (OURS, *INSPECT_SIDES)
#: Held to the throughput target: Inspect's fastest configuration (lean settings, no model HTTP at all, which
#: ours always makes). Against Inspect's defaults, or over the same HTTP endpoint, the ratio is higher.
HEADLINE = INSPECT_MOCKLLM_LEAN
LABELS = {
    OURS: "ours",
    INSPECT_OPENAI: "Inspect HTTP default",
    INSPECT_OPENAI_LEAN: "Inspect HTTP lean",
    INSPECT_MOCKLLM_LEAN: "Inspect mockllm lean",
}
TARGET_RATIO = 3.0
TARGET_CPU_MS_PER_ROLLOUT = 12.0
TARGET_BYTES_PER_ROLLOUT = 15_000
DEFAULT_SIZES = ("200x1",)
DEFAULT_REPEATS = 5
CHILD_TIMEOUT_SECONDS = 1800.0


def parse_size(text: str) -> tuple[int, int]:
    samples, _, epochs = text.partition("x")
    try:
        size = int(samples), int(epochs or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must read SAMPLESxEPOCHS, e.g. 200x1; got {text!r}") from None
    if min(size) < 1:
        raise argparse.ArgumentTypeError(f"samples and epochs must be at least 1; got {text!r}")
    return size


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


# --- children ---------------------------------------------------------------------------------------------------


def ours_child(args: argparse.Namespace) -> dict[str, Any]:
    """Runs in a fresh process: warm up, then one timed run of samples x epochs through our pipeline."""
    pipeline = OurPipeline(args.scenarios_dir, args.data_dir)
    task_ids = sorted(pipeline.scenario.tasks())
    if args.warmup:
        pipeline.run(task_ids[: args.warmup], 1, args.max_parallel, args.endpoint, model_key="warmup")
    before = _dir_bytes(args.data_dir)
    run = pipeline.run(
        task_ids[: args.samples], args.epochs, args.max_parallel, args.endpoint, endpoint_pid=args.endpoint_pid
    )
    return {
        "rollouts": run.rollouts,
        "passed": run.passed,
        "status": run.by_status,
        "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds,
        "endpoint_cpu_seconds": run.endpoint_cpu_seconds,
        "artifact_bytes": _dir_bytes(args.data_dir) - before,
        "peak_rss_mib": peak_rss_mib(),
    }


def child_main(argv: list[str]) -> dict[str, Any]:
    return ours_child(build_parser().parse_args(argv))


def run_side(
    side: str,
    samples: int,
    epochs: int,
    max_parallel: int,
    scenarios_dir: Path,
    scenario_dir: Path,
    endpoint: ModelEndpoint,
    workdir: Path,
    in_process: bool = False,
) -> dict[str, Any]:
    size = ["--samples", str(samples), "--epochs", str(epochs), "--endpoint", endpoint.url,
            "--endpoint-pid", str(endpoint.pid)]  # fmt: skip
    completions_before = endpoint.chat_completions()
    if side == OURS:
        args = ["--child", "--scenarios-dir", str(scenarios_dir), "--data-dir", str(workdir / "data"),
                "--max-parallel", str(max_parallel), *size]  # fmt: skip
        raw = run_child(Path(__file__), args, child_main, in_process=in_process, timeout=CHILD_TIMEOUT_SECONDS)
    else:
        model, settings = INSPECT_SIDES[side]
        command = [str(INSPECT_PYTHON), str(Path(__file__).resolve().parent / "inspect_task.py"), "--scenario-dir",
                   str(scenario_dir), "--model", model, "--settings", settings, "--log-dir", str(workdir / "logs"),
                   "--max-samples", str(max_parallel), *size]  # fmt: skip
        raw = run_json_child(command, timeout=CHILD_TIMEOUT_SECONDS, env=inspect_environment())
    # Warm-up included: proof that a side called the shared endpoint, and how often for the same task shape.
    raw["endpoint_chat_completions"] = endpoint.chat_completions() - completions_before
    return summarise(raw)


def inspect_environment() -> dict[str, str]:
    """This environment without `INSPECT_*` variables: Inspect reads its defaults from them (`INSPECT_DISPLAY`,
    `INSPECT_EVAL_CTL_SERVER`, `INSPECT_LOG_DIR`, ...), so a setting exported on this machine would otherwise
    change what the "default" side measures."""
    return {name: value for name, value in os.environ.items() if not name.startswith("INSPECT_")}


def summarise(raw: dict[str, Any]) -> dict[str, Any]:
    rollouts = raw["rollouts"]
    cpu_ms = 1000 * raw["cpu_seconds"] / rollouts
    endpoint_ms = 1000 * raw["endpoint_cpu_seconds"] / rollouts if raw.get("endpoint_cpu_seconds") is not None else 0.0
    return {
        **raw,
        "rollouts_per_second": round(rollouts / raw["wall_seconds"], 2),
        "cpu_ms_per_rollout": round(cpu_ms, 2),
        "endpoint_cpu_ms_per_rollout": round(endpoint_ms, 2),
        "total_cpu_ms_per_rollout": round(cpu_ms + endpoint_ms, 2),
        "rollouts_per_cpu_second": round(1000 / cpu_ms, 1),
        "bytes_per_rollout": round(raw["artifact_bytes"] / rollouts),
        "wall_seconds": round(raw["wall_seconds"], 3),
        "cpu_seconds": round(raw["cpu_seconds"], 3),
    }


# --- the run ----------------------------------------------------------------------------------------------------


def repetition_order(sides: list[str], repeat: int) -> list[str]:
    """The order of one repetition: ours beside the headline side, then the other Inspect sides, reversed on
    odd repetitions so neither member of a pair always runs first."""
    ranked = [side for side in (OURS, HEADLINE, INSPECT_OPENAI_LEAN, INSPECT_OPENAI) if side in sides]
    return ranked if repeat % 2 == 0 else ranked[::-1]


def spread(values: list[float]) -> dict[str, float]:
    return {
        "min": round(min(values), 2),
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


def paired_ratios(ours_runs: list[dict[str, Any]], other_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Ours against another side, one ratio per repetition (the two runs of a repetition ran back to back):
    the median of those, and their min/median/max. Both read "how many times better ours is"."""
    others = {run["repeat"]: run for run in other_runs}
    pairs = [(run, others[run["repeat"]]) for run in ours_runs if run["repeat"] in others]
    throughput = [ours["rollouts_per_second"] / other["rollouts_per_second"] for ours, other in pairs]
    cpu = [other["cpu_ms_per_rollout"] / ours["cpu_ms_per_rollout"] for ours, other in pairs]
    return {
        "throughput": round(statistics.median(throughput), 2),
        "cpu_per_rollout": round(statistics.median(cpu), 2),
        "throughput_spread": spread(throughput),
        "cpu_per_rollout_spread": spread(cpu),
        "pairs": len(pairs),
    }


MEDIAN_KEYS = (
    "rollouts_per_second",
    "cpu_ms_per_rollout",
    "endpoint_cpu_ms_per_rollout",
    "total_cpu_ms_per_rollout",
    "rollouts_per_cpu_second",
    "bytes_per_rollout",
)


def _median(results: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in results), 2)


def side_settings(side: str, max_parallel: int, inspect: dict[str, Any] | None) -> dict[str, Any]:
    """What a side ran with: for Inspect, what its child passed to eval() and what Inspect resolved."""
    if side == OURS:
        return {
            "path": "pipeline.steps.run_and_collect on the embedded local service (no Dagster)",
            "model": "sim-oracle over HTTP",
            "max_parallel": max_parallel,
            "tools": "the built-in email server over HTTP, a workspace per rollout",
            "recorded": "SQLite run store, state snapshots and diffs, artifacts, traces, Parquet rows",
            "warmup_rollouts": 2,
        }
    model, settings = INSPECT_SIDES[side]
    return {
        "model_kind": model,
        "settings": settings,
        "tools": "@tool functions over the sample store's mailbox, in process",
        "initial_state": "scorer closure (not in the store)",
        "warmup_samples": 2,
        **(inspect or {}),
    }


def settings_text(settings: dict[str, Any]) -> str:
    """One line for the Markdown table: the eval() arguments given, then what they resolved to."""
    if "eval_args" not in settings:
        return (
            f"{settings.get('path', '')}; {settings.get('model')}; max_parallel {settings.get('max_parallel')}; "
            f"tools: {settings.get('tools')}; recorded: {settings.get('recorded')}; "
            f"warm-up {settings.get('warmup_rollouts')} rollouts"
        )
    given = ", ".join(f"{name}={value!r}" for name, value in settings["eval_args"].items()) or "none (defaults)"
    resolved = dict(settings.get("resolved", {}))
    if resolved.get("display") == "full" and resolved.pop("stdout_is_tty", None) is False:
        resolved["display"] = "full (rich: stdout not a TTY)"
    resolved.pop("stdout_is_tty", None)
    shown = ", ".join(f"{name}={value}" for name, value in resolved.items())
    return (
        f"Inspect {settings.get('version')}, `{settings.get('model')}`; eval() args: {given}; resolved: {shown}; "
        f"tools: {settings.get('tools')}; store keys: {settings.get('store_keys')}; initial state: "
        f"{settings.get('initial_state')}; warm-up {settings.get('warmup_samples')} samples"
    )


def run(
    sizes: list[tuple[int, int]],
    sides: list[str],
    max_parallel: int,
    repeats: int,
    workdir: Path,
    in_process: bool = False,
) -> dict[str, Any]:
    missing_inspect = not INSPECT_PYTHON.is_file()
    skipped = {s: f"{INSPECT_PYTHON} not found (see --help)" for s in sides if s in INSPECT_SIDES and missing_inspect}
    active = [s for s in sides if s not in skipped]
    scenario = write_bench_scenario(workdir / "scenarios", max(samples for samples, _ in sizes))
    load_before = load_average()
    measurements: list[dict[str, Any]] = []
    inspect_settings: dict[str, dict[str, Any]] = {}
    with ModelEndpoint(scenario.scenarios_dir, in_process=in_process) as endpoint:
        for samples, epochs in sizes:
            for repeat in range(repeats):
                for side in repetition_order(active, repeat):
                    run_dir = workdir / f"{side}-{samples}x{epochs}-{repeat}"
                    result = run_side(
                        side, samples, epochs, max_parallel, scenario.scenarios_dir, scenario.scenario_dir,
                        endpoint, run_dir, in_process,
                    )  # fmt: skip
                    shutil.rmtree(run_dir, ignore_errors=True)
                    # The same for every run of a side: kept once, in `settings`.
                    if "inspect" in result:
                        inspect_settings.setdefault(side, result.pop("inspect"))
                    measurements.append(
                        {"side": side, "samples": samples, "epochs": epochs, "repeat": repeat, "load": load_average()}
                        | result
                    )
    comparisons = [compare(measurements, samples, epochs, active) for samples, epochs in sizes]
    targets = target_verdicts(comparisons)
    loads = [m["load"][0] for m in measurements]
    return {
        "benchmark": "overhead",
        "command": command_line(),
        "task": "email_ops_011 copy: 5 tool calls + final answer, state verifier, zero-latency sim-oracle",
        "max_parallel": max_parallel,
        "repeats": repeats,
        "in_process": in_process,
        "sides": active,
        "labels": {side: LABELS[side] for side in active},
        "settings": {side: side_settings(side, max_parallel, inspect_settings.get(side)) for side in active},
        "inspect_environment": "INSPECT_* variables cleared",
        "skipped": skipped,
        "headline": f"ours vs {HEADLINE} (Inspect's lean settings on its in-process mockllm: its fastest)",
        "target_ratio": TARGET_RATIO,
        "targets": targets,
        "meets_target": all(t["met"] for t in targets.values()) if targets else None,
        "comparisons": comparisons,
        "measurements": measurements,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "load_average_range": spread(loads) if loads else None,
        "machine": machine(),
        "measured_at": now_iso(),
    }


def compare(measurements: list[dict[str, Any]], samples: int, epochs: int, active: list[str]) -> dict[str, Any]:
    """One size: each side's medians over its repetitions, and ours against each Inspect side pair by pair."""
    rows = {
        side: [m for m in measurements if m["side"] == side and (m["samples"], m["epochs"]) == (samples, epochs)]
        for side in active
    }
    medians = {
        side: {key: _median(results, key) for key in MEDIAN_KEYS}
        | {"passed": min(r["passed"] for r in results), "rollouts": results[0]["rollouts"]}
        for side, results in rows.items()
        if results
    }
    ours_vs = (
        {other: paired_ratios(rows[OURS], rows[other]) for other in INSPECT_SIDES if rows.get(other)}
        if rows.get(OURS)
        else {}
    )
    return {"samples": samples, "epochs": epochs, "medians": medians, "ours_vs": ours_vs}


def target_verdicts(comparisons: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each target with the worst figure across sizes and whether it holds; a target whose side did not run
    is left out (so a run without Inspect is judged on CPU and bytes alone)."""
    ours = [c["medians"][OURS] for c in comparisons if OURS in c["medians"]]
    if not ours:
        return {}
    cpu = max(m["cpu_ms_per_rollout"] for m in ours)
    stored = max(m["bytes_per_rollout"] for m in ours)
    targets = {
        "cpu_ms_per_rollout": {"target": f"<= {TARGET_CPU_MS_PER_ROLLOUT:g}", "worst": cpu,
                               "met": cpu <= TARGET_CPU_MS_PER_ROLLOUT},
        "bytes_per_rollout": {"target": f"<= {TARGET_BYTES_PER_ROLLOUT:,}", "worst": stored,
                              "met": stored <= TARGET_BYTES_PER_ROLLOUT},
    }  # fmt: skip
    ratios_vs_headline = [c["ours_vs"][HEADLINE]["throughput"] for c in comparisons if HEADLINE in c["ours_vs"]]
    if ratios_vs_headline:
        worst = min(ratios_vs_headline)
        targets[f"throughput_vs_{HEADLINE}"] = {"target": f">= {TARGET_RATIO:g}x", "worst": worst,
                                                "met": worst >= TARGET_RATIO}  # fmt: skip
    return targets


def markdown(report: dict[str, Any]) -> str:
    loads = report.get("load_average_range") or {}
    lines = [
        f"Overhead vs Inspect AI (`{report['command']}`; concurrency {report['max_parallel']}, "
        f"{report['repeats']} paired repetitions, order alternating; 1-minute load average "
        f"{report['load_average_before'][0]} before, {loads.get('min')} to {loads.get('max')} across the runs, "
        f"{report['load_average_after'][0]} after, on {report['machine']['cpus']} CPUs)",
        "",
        "Per-side figures are medians over the repetitions; a ratio is the median of the per-pair ratios [min-max].",
        "",
        "| samples x epochs | side | rollouts/s | CPU-ms/rollout (process) | endpoint CPU-ms/rollout | "
        "bytes/rollout | passed | throughput: ours / Inspect | CPU-ms: Inspect / ours |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for comparison in report["comparisons"]:
        for side, m in comparison["medians"].items():
            ratio = comparison["ours_vs"].get(side)
            versus = (
                f"**{ratio['throughput']}x** {ratio_range(ratio, 'throughput')} | "
                f"{ratio['cpu_per_rollout']}x {ratio_range(ratio, 'cpu_per_rollout')}"
                if ratio
                else " | "
            )
            lines.append(
                f"| {comparison['samples']} x {comparison['epochs']} | {side} | {m['rollouts_per_second']} | "
                f"{m['cpu_ms_per_rollout']} | {m['endpoint_cpu_ms_per_rollout']} | {int(m['bytes_per_rollout']):,} | "
                f"{m['passed']}/{m['rollouts']} | {versus} |"
            )
    lines += ["", "| side | settings |", "|---|---|"]
    lines += [f"| {side} | {settings_text(settings)} |" for side, settings in report["settings"].items()]
    lines += ["", f"Throughput target against {report['headline']}.", "", "| target | worst figure | verdict |",
              "|---|---|---|"]  # fmt: skip
    for name, t in report["targets"].items():
        lines.append(f"| {name} {t['target']} | {t['worst']} | {'meets' if t['met'] else '**MISSES**'} |")
    if report["skipped"]:
        lines.append(f"Skipped: {report['skipped']}")
    return "\n".join(lines)


def ratio_range(ratio: dict[str, Any], measure: str) -> str:
    """ "[min-max]" of a ratio's per-pair values."""
    values = ratio[f"{measure}_spread"]
    return f"[{values['min']}-{values['max']}]"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=parse_size, default=[parse_size(s) for s in DEFAULT_SIZES])
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument(
        "--max-parallel", type=int, default=10, help="rollouts in flight (Inspect: max_samples = max_connections)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_REPEATS,
        help="paired repetitions per size (every side once each); medians and per-pair ratio spreads are reported",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep the run folders here")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where overhead.{json,md} go ('' = nowhere)")
    parser.add_argument(
        "--in-process", action="store_true", help="our side and the endpoint in this process (smoke tests only)"
    )
    # The child process of one side ('ours'); the parent passes these.
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenarios-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=200, help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=2, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(ours_child(args)))
        return 0
    if args.max_parallel < 1 or args.repeats < 1:
        parser.error("--max-parallel and --repeats must be at least 1")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ep-overhead-"))
    try:
        report = run(args.sizes, args.sides, args.max_parallel, args.repeats, workdir, args.in_process)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    write_report("overhead", report, markdown(report), Path(args.out) if args.out else None)
    return 0 if report["meets_target"] in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())
