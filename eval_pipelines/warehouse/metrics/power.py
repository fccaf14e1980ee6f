"""Power: the minimum detectable difference (MDD) of a comparison, and how many epochs (rollouts per task) a
sweep needs to detect a chosen difference. Python references and the SQL the views use, from one formula.

A comparison of two models over G tasks, each task's difference averaged over k epochs, has
Var(diff) = (sigma2_between + sigma2_within / k) / G: `sigma2_within` is the epoch-to-epoch variance of one
task's difference (it shrinks with more epochs), `sigma2_between` how much the difference varies from task to
task (only more tasks shrink it). A two-sided test at level ALPHA has power POWER against a true difference of
MDD = (z(1 - ALPHA / 2) + z(POWER)) * sqrt(Var(diff)) (normal approximation).
"""

from __future__ import annotations

import math

from eval_pipelines.schemas.sweep import DEFAULT_DETECTABLE_DIFFERENCE

#: Two-sided significance level and power of the minimum detectable difference.
ALPHA = 0.05
POWER = 0.80
#: z(1 - ALPHA / 2) and z(POWER) of the standard normal.
Z_ALPHA = 1.959963984540054
Z_POWER = 0.8416212335729143
#: MDD = POWER_FACTOR * standard error.
POWER_FACTOR = Z_ALPHA + Z_POWER

__all__ = [
    "ALPHA",
    "DEFAULT_DETECTABLE_DIFFERENCE",
    "POWER",
    "POWER_FACTOR",
    "epochs_needed",
    "epochs_needed_sql",
    "minimum_detectable_difference",
]


def minimum_detectable_difference(std_error: float) -> float:
    """The true difference a two-sided test at ALPHA detects with probability POWER, given the estimate's SE."""
    return POWER_FACTOR * std_error


def epochs_needed(sigma2_between: float, sigma2_within: float, n_tasks: int, difference: float) -> int | None:
    """The fewest epochs per task for which G = n_tasks tasks detect `difference` (MDD <= difference); None when
    no number of epochs can (the task-to-task variance alone is too large: more tasks are needed)."""
    budget = n_tasks * (difference / POWER_FACTOR) ** 2 - sigma2_between
    if budget <= 0:
        return None
    return max(1, math.ceil(sigma2_within / budget - 1e-9))


def epochs_needed_sql(sigma2_between: str, sigma2_within: str, n_tasks: str, difference: float) -> str:
    """SQL for `epochs_needed` over the given column expressions (NULL when no number of epochs suffices)."""
    budget = f"(({n_tasks}) * {(difference / POWER_FACTOR) ** 2!r} - ({sigma2_between}))"
    # DuckDB's greatest() skips NULLs: an unknown within-task variance must be caught before it.
    within = f"({sigma2_within})"
    return (
        f"case when {within} is not null and {budget} > 0 "
        f"then greatest(1, ceil({within} / {budget} - 1e-9))::bigint end"
    )
