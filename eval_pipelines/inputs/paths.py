"""Where the project's inputs and outputs live. One place, so every layer agrees.

A *project directory* holds a project's inputs and outputs: `sweeps/` (sweep configs), `scenarios/` (its own
scenarios, read beside the built-in ones), `data/` (every output), and `dagster.yaml` / `workspace.yaml`. It is
`$EVAL_PIPELINES_PROJECT_DIR` (which `eval-pipelines --project-dir` sets), else the current directory; the
repository is one. The built-in scenarios, the default sweep and the project templates are package data
(`eval_pipelines/builtin/`), so an installed package finds them wherever it is installed and writes nothing
beside itself.

`EVAL_PIPELINES_DATA_DIR` moves all generated output; `EVAL_PIPELINES_SCENARIOS_DIR` and
`EVAL_PIPELINES_SWEEPS_DIR` replace the project's input folders (a scenarios folder named this way is read
alone, without the built-in scenarios).
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_DIR_ENV = "EVAL_PIPELINES_PROJECT_DIR"
DATA_DIR_ENV = "EVAL_PIPELINES_DATA_DIR"
SCENARIOS_DIR_ENV = "EVAL_PIPELINES_SCENARIOS_DIR"
SWEEPS_DIR_ENV = "EVAL_PIPELINES_SWEEPS_DIR"
CACHE_DIR_ENV = "EVAL_PIPELINES_CACHE_DIR"
#: `<prefix><NAME>` points a benchmark (`..._BFCL`) at an interpreter that has its upstream package already.
BENCHMARK_PYTHON_ENV_PREFIX = "EVAL_PIPELINES_BENCHMARK_PYTHON_"


def cache_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The settings (never secrets) that say where the cache is and which benchmark interpreters to use, for a
    child process that starts upstream workers with an otherwise scrubbed environment."""
    source = dict(os.environ) if environ is None else environ
    return {
        name: value
        for name, value in source.items()
        if name in (CACHE_DIR_ENV, "XDG_CACHE_HOME") or name.startswith(BENCHMARK_PYTHON_ENV_PREFIX)
    }


#: Package data: the built-in scenarios and sweeps, and the files `eval-pipelines init` writes.
BUILTIN_DIR = Path(__file__).resolve().parents[1] / "builtin"
PROJECT_TEMPLATE_DIR = BUILTIN_DIR / "project"


def project_dir() -> Path:
    env = os.environ.get(PROJECT_DIR_ENV)
    return Path(env).resolve() if env else Path.cwd()


def data_dir() -> Path:
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env) if env else project_dir() / "data"


def cache_dir() -> Path:
    """What is costly to make and safe to share between projects and runs (the benchmarks' upstream venvs):
    `$EVAL_PIPELINES_CACHE_DIR`, else `$XDG_CACHE_HOME/eval_pipelines`, else `~/.cache/eval_pipelines`."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "eval_pipelines"


def benchmarks_data_dir(data: Path | None = None) -> Path:
    """Where materialised benchmark scenarios live: `<data>/benchmarks/<family>/` (generated, never edited)."""
    return (data if data is not None else data_dir()) / "benchmarks"


def project_scenarios_dir() -> Path:
    """The project's own scenarios folder (read beside the built-in scenarios; where generated and imported
    scenarios are written)."""
    return project_dir() / "scenarios"


def scenarios_dir() -> Path:
    """The scenarios folder this process reads and writes: `$EVAL_PIPELINES_SCENARIOS_DIR`, else the project's."""
    env = os.environ.get(SCENARIOS_DIR_ENV)
    return Path(env) if env else project_scenarios_dir()


def builtin_scenarios_dir() -> Path:
    return BUILTIN_DIR / "scenarios"


def reads_builtin_scenarios(root: Path) -> bool:
    """Whether a catalog of `root` also holds the built-in scenarios: only the project's own folder does; a
    folder named by `$EVAL_PIPELINES_SCENARIOS_DIR` or by a caller is read alone."""
    return root.resolve() == project_scenarios_dir().resolve()


def sweeps_dir() -> Path:
    """The sweep configs this process reads: `$EVAL_PIPELINES_SWEEPS_DIR`, else the project's `sweeps/`, else
    (a project with no sweep config of its own) the built-in ones."""
    env = os.environ.get(SWEEPS_DIR_ENV)
    if env:
        return Path(env)
    own = project_dir() / "sweeps"
    has_configs = own.is_dir() and any(p.suffix in (".yaml", ".yml") for p in own.iterdir())
    return own if has_configs else BUILTIN_DIR / "sweeps"


def dagster_config_dir() -> Path:
    """The folder of the `dagster.yaml` the CLI opens when `DAGSTER_HOME` is unset: the project's, else the
    package's template (its storage paths are relative to the project directory)."""
    own = project_dir()
    return own if (own / "dagster.yaml").is_file() else PROJECT_TEMPLATE_DIR
