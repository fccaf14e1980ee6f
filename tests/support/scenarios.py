"""Copies of built-in scenarios for tests that edit them (a verifier, a task) without touching the package."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from eval_pipelines.inputs.paths import builtin_scenarios_dir


def copy_builtin_scenarios(target: Path, scenario_ids: Iterable[str]) -> Path:
    """`target/<family>/` for each scenario id (`email_ops:1.0.0` -> `email_ops`); returns `target`."""
    for scenario_id in scenario_ids:
        family = scenario_id.partition(":")[0]
        shutil.copytree(builtin_scenarios_dir() / family, target / family, ignore=shutil.ignore_patterns("__pycache__"))
    return target
