"""OpenAI-compatible chat completions: the async client, wire types, typed errors, usage metering and cost
estimates. The simulated models that speak the same wire live in `sim/`.

The names below load on first use (PEP 562): a reader of `types` or `pricing` does not import the HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipelines.lib.lazy_names import lazy_names

if TYPE_CHECKING:
    from eval_pipelines.llm.client import (
        DEFAULT_MAX_CONCURRENCY,
        DEFAULT_TIMEOUT_SECONDS,
        ChatClient,
        normalise_base_url,
    )
    from eval_pipelines.llm.errors import (
        LLMAuthError,
        LLMBadRequestError,
        LLMConnectionError,
        LLMError,
        LLMInvalidModelError,
        LLMRateLimitError,
        LLMResponseError,
        LLMTimeoutError,
        scrub_secrets,
    )
    from eval_pipelines.llm.pricing import MODEL_PRICES_USD_PER_MILLION, ModelPrice, estimate_cost_usd, price_for
    from eval_pipelines.llm.types import (
        TOOL_NAME_SEPARATOR,
        ChatCompletion,
        ChatMessage,
        ChatRequest,
        Choice,
        FunctionCall,
        FunctionSpec,
        ToolCallWire,
        ToolSpec,
        Usage,
        split_wire_tool_name,
        wire_tool_name,
    )

_HOMES = {
    "ChatClient": "client",
    "ChatCompletion": "types",
    "ChatMessage": "types",
    "ChatRequest": "types",
    "Choice": "types",
    "DEFAULT_MAX_CONCURRENCY": "client",
    "DEFAULT_TIMEOUT_SECONDS": "client",
    "FunctionCall": "types",
    "FunctionSpec": "types",
    "LLMAuthError": "errors",
    "LLMBadRequestError": "errors",
    "LLMConnectionError": "errors",
    "LLMError": "errors",
    "LLMInvalidModelError": "errors",
    "LLMRateLimitError": "errors",
    "LLMResponseError": "errors",
    "LLMTimeoutError": "errors",
    "MODEL_PRICES_USD_PER_MILLION": "pricing",
    "ModelPrice": "pricing",
    "TOOL_NAME_SEPARATOR": "types",
    "ToolCallWire": "types",
    "ToolSpec": "types",
    "Usage": "types",
    "estimate_cost_usd": "pricing",
    "normalise_base_url": "client",
    "price_for": "pricing",
    "scrub_secrets": "errors",
    "split_wire_tool_name": "types",
    "wire_tool_name": "types",
}

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_TIMEOUT_SECONDS",
    "MODEL_PRICES_USD_PER_MILLION",
    "TOOL_NAME_SEPARATOR",
    "ChatClient",
    "ChatCompletion",
    "ChatMessage",
    "ChatRequest",
    "Choice",
    "FunctionCall",
    "FunctionSpec",
    "LLMAuthError",
    "LLMBadRequestError",
    "LLMConnectionError",
    "LLMError",
    "LLMInvalidModelError",
    "LLMRateLimitError",
    "LLMResponseError",
    "LLMTimeoutError",
    "ModelPrice",
    "ToolCallWire",
    "ToolSpec",
    "Usage",
    "estimate_cost_usd",
    "normalise_base_url",
    "price_for",
    "scrub_secrets",
    "split_wire_tool_name",
    "wire_tool_name",
]


__getattr__ = lazy_names(__name__, globals(), _HOMES)
