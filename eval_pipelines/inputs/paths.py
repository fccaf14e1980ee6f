"""Where the project's inputs and outputs live. One place, so every layer agrees.

`EVAL_PIPELINES_DATA_DIR` moves all generated output (warehouse, DuckDB catalog, traces, the local service's
store); the inputs (scenarios, sweep configs) have their own variables.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "EVAL_PIPELINES_DATA_DIR"
SCENARIOS_DIR_ENV = "EVAL_PIPELINES_SCENARIOS_DIR"
SWEEPS_DIR_ENV = "EVAL_PIPELINES_SWEEPS_DIR"


def project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env) if env else project_root() / "data"


def scenarios_dir() -> Path:
    env = os.environ.get(SCENARIOS_DIR_ENV)
    return Path(env) if env else project_root() / "data" / "scenarios"


def sweeps_dir() -> Path:
    env = os.environ.get(SWEEPS_DIR_ENV)
    return Path(env) if env else project_root() / "data" / "sweeps"
