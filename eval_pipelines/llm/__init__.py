"""OpenAI-compatible chat completions: the async client, wire types, typed errors, usage metering and cost
estimates. The simulated models that speak the same wire live in `sim/`."""

from eval_pipelines.llm.client import DEFAULT_MAX_CONCURRENCY, DEFAULT_TIMEOUT_SECONDS, ChatClient, normalise_base_url
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
