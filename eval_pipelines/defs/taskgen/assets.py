"""Task generation as an asset: a scenario's toolset in, a new runnable scenario (and its partition) out."""

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from eval_pipelines.defs.evals.partitions import SCENARIOS
from eval_pipelines.defs.evals.resources import EvalPaths
from eval_pipelines.inputs.scenarios import partition_key
from eval_pipelines.pipeline.generation import generate_into_catalog, toolset_from_server, toolset_of_scenario
from eval_pipelines.schemas.taskgen import DEFAULT_NUM_TASKS, MAX_NUM_TASKS


class GeneratedTasksConfig(dg.Config):
    """What to generate. The new scenario gets its own id; the partition names the scenario whose tools it uses."""

    scenario_id: str = Field(description="id of the new scenario, e.g. 'calendar_gen:1.0.0'")
    num_tasks: int = Field(default=DEFAULT_NUM_TASKS, ge=1, le=MAX_NUM_TASKS)
    preset: str | None = None
    model: str | None = Field(default=None, description="'schema' forces the deterministic generator")
    complexity: dict[str, float] | None = None
    diversity: dict[str, Any] | None = None
    tool_server_url: str | None = Field(default=None, description="read the toolset from this server's /tools")


@dg.asset(
    partitions_def=SCENARIOS,
    group_name="taskgen",
    kinds={"python"},
    description="Generates a new scenario (tasks, instructions, rubrics, gated verifiers, skills document) from "
    "the partition scenario's toolset and adds its partition, so the next sweep includes it.",
)
def generated_tasks(
    context: dg.AssetExecutionContext, config: GeneratedTasksConfig, paths: EvalPaths
) -> dg.MaterializeResult:
    source = paths.catalog().get(context.partition_key)
    toolset = toolset_from_server(config.tool_server_url) if config.tool_server_url else toolset_of_scenario(source)
    options = config.model_dump(exclude={"scenario_id", "tool_server_url"})
    results, folder = generate_into_catalog(
        toolset, Path(paths.scenarios_dir), config.scenario_id, options, progress=context.log.info, overwrite=True
    )
    context.instance.add_dynamic_partitions(SCENARIOS.name or "scenarios", [partition_key(config.scenario_id)])
    return dg.MaterializeResult(
        metadata={
            "folder": str(folder),
            "tasks": len(results.tasks),
            "filter_summary": dg.MetadataValue.json(results.filter_summary or {}),
        }
    )
