"""Rough cost estimates for a rollout's token usage.

THE TABLE IS AN ESTIMATE. It holds list prices (USD per million tokens, input/output) of a few well-known
models as publicly listed at the time of writing; providers change them, discount batch/cached tokens and
bill reasoning tokens differently. It feeds `estimated_cost_usd` in rollout results for comparing runs, not
for billing. The offline simulated models cost 0.0; a model the table does not know has an unknown cost (None),
never 0.0, which would read as free. A sweep's cost ceiling (`max_cost_usd`) counts only known costs, so each
unknown model is logged once as a warning.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from eval_pipelines.schemas.sweep import is_simulated_model

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelPrice:
    input_per_million: float
    output_per_million: float


#: Keys are model-name prefixes; the longest matching prefix wins (`gpt-4o-mini` before `gpt-4o`).
MODEL_PRICES_USD_PER_MILLION: dict[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(0.15, 0.60),
    "gpt-4o": ModelPrice(2.50, 10.00),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60),
    "gpt-4.1": ModelPrice(2.00, 8.00),
    "gpt-4-turbo": ModelPrice(10.00, 30.00),
    "gpt-4": ModelPrice(30.00, 60.00),
    "gpt-3.5-turbo": ModelPrice(0.50, 1.50),
    "o1-mini": ModelPrice(1.10, 4.40),
    "o1": ModelPrice(15.00, 60.00),
    "o3-mini": ModelPrice(1.10, 4.40),
    "o3": ModelPrice(2.00, 8.00),
    "o4-mini": ModelPrice(1.10, 4.40),
    "claude-3-5-haiku": ModelPrice(0.80, 4.00),
    "claude-3-5-sonnet": ModelPrice(3.00, 15.00),
    "claude-3-7-sonnet": ModelPrice(3.00, 15.00),
    "claude-3-opus": ModelPrice(15.00, 75.00),
    "claude-3-haiku": ModelPrice(0.25, 1.25),
    "claude-sonnet-4": ModelPrice(3.00, 15.00),
    "claude-opus-4": ModelPrice(15.00, 75.00),
    "gemini-1.5-flash": ModelPrice(0.075, 0.30),
    "gemini-1.5-pro": ModelPrice(1.25, 5.00),
    "gemini-2.0-flash": ModelPrice(0.10, 0.40),
    "gemini-2.5-flash": ModelPrice(0.30, 2.50),
    "gemini-2.5-pro": ModelPrice(1.25, 10.00),
}


def _normalise(name: str) -> str:
    # OpenRouter-style names carry the vendor (`openai/gpt-4o`); Anthropic ids use dots or dashes for versions.
    name = name.strip().lower().rsplit("/", 1)[-1]
    return name.replace(".", "-")


_NORMALISED_PRICES = sorted(
    ((_normalise(prefix), price) for prefix, price in MODEL_PRICES_USD_PER_MILLION.items()),
    key=lambda item: len(item[0]),
    reverse=True,
)


def price_for(model: str) -> ModelPrice | None:
    """The table entry for a model name, or None when it is unknown or simulated."""
    if is_simulated_model(model):
        return None
    name = _normalise(model)
    for prefix, price in _NORMALISED_PRICES:
        if name.startswith(prefix):
            return price
    return None


_unpriced_models_warned: set[str] = set()
_unpriced_lock = threading.Lock()


def _warn_unpriced_once(model: str) -> None:
    with _unpriced_lock:
        if model in _unpriced_models_warned:
            return
        _unpriced_models_warned.add(model)
    logger.warning(
        "no price is known for model %r: its cost is shown as unknown, and a cost ceiling (max_cost_usd) "
        "counts only the calls whose price is known",
        model,
    )


def estimate_cost_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Estimated USD cost of one call or a rollout's totals: 0.0 for the simulated models, None (unknown) for a
    model without a price."""
    if prompt_tokens < 0 or completion_tokens < 0:
        raise ValueError("token counts must not be negative")
    if is_simulated_model(model):
        return 0.0
    price = price_for(model)
    if price is None:
        _warn_unpriced_once(model)
        return None
    return (prompt_tokens * price.input_per_million + completion_tokens * price.output_per_million) / 1_000_000
