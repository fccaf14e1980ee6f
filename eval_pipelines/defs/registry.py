"""Every asset of the code location, built in one place: `definitions.py` serves them, and the CLI's runner
(defs/runner.py) materialises them without loading the code location."""

from __future__ import annotations

import dagster as dg

from eval_pipelines.defs.assessment.assets import ASSESSMENT_ASSETS
from eval_pipelines.defs.evals.assets import (
    eval_catalog,
    eval_report,
    eval_run,
    rollouts,
    rubric_verification,
    verification,
)
from eval_pipelines.defs.taskgen.assets import generated_tasks


def build_assets() -> list[dg.AssetsDefinition]:
    """The assets, unbound, in a stable order: eval_run, rollouts, verification, eval_catalog, then the
    assessment assets, task generation, rubric verification and the report."""
    return [
        eval_run,
        rollouts,
        verification,
        eval_catalog,
        *ASSESSMENT_ASSETS,
        generated_tasks,
        rubric_verification,
        eval_report,
    ]


def assets_by_name() -> dict[str, dg.AssetsDefinition]:
    return {a.key.to_user_string(): a for a in build_assets()}
