"""Synthetic-data generation: `multiplier` new rows per example, each keeping the example's keys.

Generations run concurrently (bounded) and are yielded in example order, so the endpoint can stream each row
as soon as it and the rows before it are ready. A reply that is not a JSON object with the example's keys is
asked for once more and then dropped: the endpoint aims at `len(examples) x multiplier` rows.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipelines.llm.errors import LLMError
from eval_pipelines.llm.tagged_json import SYNTHESIS_TAG, extract_json_object, tagged
from eval_pipelines.llm.types import ChatMessage
from eval_pipelines.platform.models import ModelRouter, ModelUnavailable

logger = logging.getLogger(__name__)

MAX_GENERATION_ATTEMPTS = 2

_SYSTEM = (
    "You write synthetic rows for an evaluation dataset. Follow the instruction to transform the example into a "
    "new, different row. Keep exactly the same JSON keys and structure as the example (same nesting, same list "
    "shapes, same message roles) and change only the text. Answer with the new row as one JSON object and "
    "nothing else."
)


@dataclass(frozen=True)
class GeneratedRow:
    position: int
    original: dict[str, Any]
    generated: str


def synth_messages(prompt: str, example: Mapping[str, Any], variant: int, variants: int) -> list[ChatMessage]:
    payload = {"instruction": prompt, "example": dict(example), "variant": variant, "variants": variants}
    return [
        ChatMessage.system(_SYSTEM),
        ChatMessage.user(f"Write variant {variant + 1} of {variants}.\n{tagged(SYNTHESIS_TAG, payload)}"),
    ]


def parse_generated(text: str, example: Mapping[str, Any]) -> dict[str, Any] | None:
    """The generated row when it is a JSON object with exactly the example's keys, else None."""
    data = extract_json_object(text)
    if data is None or set(data) != set(example):
        return None
    return data


async def _generate_one(
    router: ModelRouter, model_name: str, prompt: str, example: Mapping[str, Any], variant: int, variants: int
) -> str | None:
    messages = synth_messages(prompt, example, variant, variants)
    for attempt in range(1, MAX_GENERATION_ATTEMPTS + 1):
        try:
            text = await router.complete(model_name, messages, user=f"synth-{variant}")
        except (LLMError, ModelUnavailable) as exc:
            logger.warning("synthetic generation %d failed on attempt %d: %s", variant, attempt, exc)
            continue
        row = parse_generated(text, example)
        if row is not None:
            return json.dumps(row, ensure_ascii=False)
        logger.info(
            "synthetic generation %d: reply is not a row with the example's keys (attempt %d)", variant, attempt
        )
    return None


async def generate_rows(
    router: ModelRouter,
    model_name: str,
    *,
    examples: Sequence[Mapping[str, Any]],
    multiplier: int,
    prompt: str,
    concurrency: int,
) -> AsyncIterator[GeneratedRow]:
    """Yield the generated rows in order (example by example, variant by variant), skipping failed ones."""
    semaphore = asyncio.Semaphore(concurrency)

    async def bounded(example: Mapping[str, Any], variant: int) -> str | None:
        async with semaphore:
            return await _generate_one(router, model_name, prompt, example, variant, multiplier)

    tasks = [asyncio.ensure_future(bounded(example, variant)) for example in examples for variant in range(multiplier)]
    try:
        for position, task in enumerate(tasks):
            generated = await task
            if generated is not None:
                yield GeneratedRow(position, dict(examples[position // multiplier]), generated)
    finally:
        # A client that disconnects mid-stream must not leave generations running.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
