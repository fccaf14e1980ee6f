"""Scenario (template) catalog read from the on-disk layout under `data/scenarios/`."""

from eval_pipelines.scenarios.catalog import (
    ScenarioCatalog,
    ScenarioError,
    ScenarioFiles,
    default_scenarios_dir,
    partition_key,
)

__all__ = ["ScenarioCatalog", "ScenarioError", "ScenarioFiles", "default_scenarios_dir", "partition_key"]
