"""Synthetic data: a scenario's seed examples expanded by the platform's generator into `synthetic_rows`."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipelines.clients.platform import (
    ParsedSyntheticRow,
    PlatformClient,
    PlatformTarget,
)
from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.schemas.platform import (
    SIM_SYNTH_MODEL_ID,
    SynthDataRequest,
)
from eval_pipelines.warehouse.rows import ColumnTable, build_table
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import SYNTHETIC_ROWS

logger = logging.getLogger(__name__)


DEFAULT_SYNTH_PROMPT = (
    "Rewrite the example as a new, realistic request of the same kind, with the same structure and a different "
    "wording and details."
)


def seed_examples(scenario: ScenarioFiles, limit: int = 3) -> list[dict[str, Any]]:
    """A scenario's seed examples for synthetic data: its first tasks as (instruction, reference answer) rows."""
    examples = []
    for task in list(scenario.tasks().values())[:limit]:
        examples.append(
            {
                "conv_prefix": [{"role": "user", "content": task.description}],
                "response": {"role": "assistant", "content": task.reference_answer or "Done."},
                "context": json.dumps({"task_id": task.task_id}, sort_keys=True),
            }
        )
    return examples


async def expand_synthetic(
    client: PlatformClient,
    examples: Sequence[Mapping[str, Any]],
    multiplier: int,
    prompt: str = DEFAULT_SYNTH_PROMPT,
    *,
    model_id: str = SIM_SYNTH_MODEL_ID,
) -> list[ParsedSyntheticRow]:
    return await client.generate_synthetic(
        SynthDataRequest(
            model_id=uuid.UUID(model_id), multiplier=multiplier, examples=[dict(e) for e in examples], prompt=prompt
        )
    )


def synthetic_rows_table(
    scenario_id: str,
    rows: Sequence[ParsedSyntheticRow],
    *,
    model_id: str,
    prompt: str,
    generated_at: dt.datetime | None = None,
) -> ColumnTable:
    when = generated_at or dt.datetime.now(dt.UTC)
    columns: dict[str, list[Any]] = {
        "scenario_id": [scenario_id] * len(rows),
        "row_index": list(range(len(rows))),
        "model_id": [model_id] * len(rows),
        "prompt": [prompt] * len(rows),
        "original_json": [json.dumps(r.original, ensure_ascii=False, sort_keys=True) for r in rows],
        "generated_json": [json.dumps(r.data, ensure_ascii=False, sort_keys=True) for r in rows],
        "generated_at": [when] * len(rows),
    }
    return build_table(SYNTHETIC_ROWS, columns)


def synthetic_rows_step(
    target: PlatformTarget, warehouse: Warehouse, scenario: ScenarioFiles, multiplier: int = 4
) -> int:
    """Expand the scenario's seed examples with synthetic-data generation and write `synthetic_rows`."""
    examples = seed_examples(scenario)

    async def go() -> list[ParsedSyntheticRow]:
        async with target.client() as client:
            return await expand_synthetic(client, examples, multiplier)

    rows = asyncio.run(go())
    table = synthetic_rows_table(scenario.scenario_id, rows, model_id=SIM_SYNTH_MODEL_ID, prompt=DEFAULT_SYNTH_PROMPT)
    warehouse.write_scenario_table(
        "synthetic_rows", table, scenario_key=scenario.key, file_stem=f"synth-{SIM_SYNTH_MODEL_ID}"
    )
    return table.num_rows
