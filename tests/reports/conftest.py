from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.reports.synthetic_warehouse import T0, Attempt, attempts_with, build

#: Two sweeps; the later one is what a report shows by default.
OLD_SWEEP, NEW_SWEEP = "nightly-0101", "nightly-0102"


def report_attempts() -> list[Attempt]:
    attempts: list[Attempt] = []
    later = T0 + timedelta(days=1)
    for scenario, tasks in (("email_ops:1.0.0", 6), ("calendar:2.0.0", 4)):
        for model, skill, simulated, cost in (("gpt-real", 3, False, 0.02), ("sim-oracle", 4, True, 0.0)):
            counts = {f"task-{t}": (4, min(4, (t * skill) % 5)) for t in range(tasks)}
            attempts += attempts_with(
                counts, model_name=model, scenario_id=scenario, sweep_id=NEW_SWEEP, is_simulated=simulated,
                cost_usd=cost, created_at=later,
            )  # fmt: skip
        attempts += attempts_with(
            {f"task-{t}": (2, 0) for t in range(tasks)}, model_name="sim-noop", scenario_id=scenario,
            sweep_id=NEW_SWEEP, is_simulated=True, cost_usd=0.0, created_at=later,
        )  # fmt: skip
    # An older sweep whose id sorts after the new one: the default must follow time, not the id.
    attempts += attempts_with(
        {"task-0": (3, 3)}, model_name="gpt-real", scenario_id="email_ops:1.0.0", sweep_id="zz-old"
    )
    attempts += attempts_with(
        {"task-0": (1, 0)}, model_name="gpt-real", scenario_id="email_ops:1.0.0", sweep_id=OLD_SWEEP
    )
    return attempts


@pytest.fixture(scope="session")
def report_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("report-catalog"), report_attempts())
