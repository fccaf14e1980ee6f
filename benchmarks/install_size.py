"""Install benchmark: the default install (no extras) of the package's wheel in a fresh venv, before and after.

    .venv/bin/python benchmarks/install_size.py                       # before = eefaa23, after = HEAD
    .venv/bin/python benchmarks/install_size.py --before eefaa23 --after HEAD --pip-cache

For each revision: a `git worktree` of it, its wheel built there (`pip wheel --no-deps`, not timed), a fresh venv
(`python -m venv`, which brings pip), then `pip install <wheel>` timed from start to end: wall time, the CPU of pip
and its children, the load average before and after. The venv's size is what `du` reports (allocated blocks) of the
whole venv after the install, with the number of distributions installed besides pip. pip's download cache is off
by default (`--no-cache-dir`: every wheel is fetched, as on a first install); with `--pip-cache` it is a temporary
cache of its own, shared by the two installs. The revisions run one after the other, never together.

Results: JSON on stdout and in `benchmarks/results/install_size.{json,md}` (git-ignored), plus a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO_ROOT, RESULTS_DIR, command_line, load_average, machine, now_iso, write_report

#: The revision the issue measured (714 MB, 2 min 05 s, 108 packages), the last before the lighter install.
DEFAULT_BEFORE = "eefaa23"
#: Where the install time and the venv size should be at most this share of the revision before.
TARGET_SHARE = 0.5


def _run(command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:4])}... exited {done.returncode}:\n{(done.stderr or done.stdout)[-3000:]}"
        )
    return done.stdout


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def du_bytes(root: Path) -> tuple[int, int]:
    """(allocated bytes as `du` counts them, apparent bytes) of every file under `root`, hard links once."""
    seen: set[tuple[int, int]] = set()
    allocated = apparent = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                stat = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if (stat.st_dev, stat.st_ino) in seen:
                continue
            seen.add((stat.st_dev, stat.st_ino))
            allocated += stat.st_blocks * 512
            apparent += stat.st_size
    return allocated, apparent


def base_python() -> str:
    """The interpreter this venv was made from: the fresh venvs get the same Python."""
    return getattr(sys, "_base_executable", None) or sys.executable


def measure(revision: str, work: Path, pip_cache: Path | None) -> dict[str, Any]:
    commit = _run(["git", "rev-parse", "--short", revision], cwd=REPO_ROOT).strip()
    source = work / f"src-{commit}"
    dist = work / f"dist-{commit}"
    venv = work / f"venv-{commit}"
    _run(["git", "worktree", "add", "--detach", str(source), commit], cwd=REPO_ROOT)
    try:
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)])
        [wheel] = sorted(dist.glob("eval_pipelines-*.whl"))
        _run([base_python(), "-m", "venv", str(venv)])
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        pip += ["--no-cache-dir"] if pip_cache is None else ["--cache-dir", str(pip_cache)]
        empty_allocated, _ = du_bytes(venv)
        load_before = load_average()
        cpu_before = _children_cpu()
        started = time.perf_counter()
        _run([*pip, str(wheel)], cwd=work)
        seconds = time.perf_counter() - started
        cpu = _children_cpu() - cpu_before
        load_after = load_average()
        allocated, apparent = du_bytes(venv)
        listed = json.loads(_run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"]))
        names = sorted(d["name"].lower() for d in listed if d["name"].lower() not in ("pip", "setuptools"))
        return {
            "revision": commit,
            "wheel": wheel.name,
            "install_seconds": round(seconds, 1),
            "install_cpu_seconds": round(cpu, 1),
            "venv_mb": round(allocated / 1e6, 1),
            "venv_apparent_mb": round(apparent / 1e6, 1),
            "empty_venv_mb": round(empty_allocated / 1e6, 1),
            "distributions": len(names),
            "distribution_names": names,
            "load_average_before": load_before,
            "load_average_after": load_after,
        }
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(source)], cwd=REPO_ROOT, capture_output=True)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s" if seconds >= 60 else f"{seconds:.1f} s"


def markdown(before: dict[str, Any], after: dict[str, Any]) -> str:
    rows = ["| | revision | install time | CPU | venv (du) | distributions | load average before -> after |"]
    rows.append("|---|---|---|---|---|---|---|")
    for label, r in (("before", before), ("after", after)):
        rows.append(
            f"| {label} | `{r['revision']}` | {_minutes(r['install_seconds'])} | {r['install_cpu_seconds']} s | "
            f"{r['venv_mb']:.0f} MB | {r['distributions']} | {r['load_average_before'][0]} -> "
            f"{r['load_average_after'][0]} |"
        )
    share_t = after["install_seconds"] / before["install_seconds"]
    share_s = after["venv_mb"] / before["venv_mb"]
    rows.append(f"\nafter / before: install time {share_t:.0%}, venv size {share_s:.0%} (target <= {TARGET_SHARE:.0%})")
    gone = sorted(set(before["distribution_names"]) - set(after["distribution_names"]))
    rows.append(f"no longer installed: {', '.join(gone) or 'none'}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=DEFAULT_BEFORE, help=f"revision before (default {DEFAULT_BEFORE})")
    parser.add_argument("--after", default="HEAD", help="revision after (default HEAD)")
    parser.add_argument("--pip-cache", action="store_true", help="let pip cache downloads (in a temporary folder)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for install_size.{json,md}")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="install-size-") as tmp:
        work = Path(tmp)
        cache = work / "pip-cache" if args.pip_cache else None
        before = measure(args.before, work, cache)
        after = measure(args.after, work, cache)
    report = {
        "benchmark": "install_size",
        "when": now_iso(),
        "command": command_line(),
        "machine": machine(),
        "pip_cache": args.pip_cache,
        "before": before,
        "after": after,
        "install_time_share": round(after["install_seconds"] / before["install_seconds"], 3),
        "venv_size_share": round(after["venv_mb"] / before["venv_mb"], 3),
        "target_share": TARGET_SHARE,
    }
    write_report("install_size", report, markdown(before, after), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
