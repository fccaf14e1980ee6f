"""ModelConfig (spec 000) and the providers it can name.

Every provider is reached through an OpenAI-compatible chat-completions endpoint, so `custom` plus a
`base_url` covers vLLM, Ollama, llama.cpp and any proxy; the hosted providers only differ in their default
base URL and the environment variable that conventionally holds their key.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, SecretStr, field_serializer

from eval_pipelines.schemas._base import StrictModel, WireModel

DEFAULT_TEMPERATURE = 0.7
MIN_TEMPERATURE = 0.0
MAX_TEMPERATURE = 2.0
DEFAULT_MAX_STEPS = 30
DEFAULT_CONTEXT_STRIDE = 3
DEFAULT_SUMMARIZE_EVERY_N_TURNS = 0
#: Tool calls of one model reply that the reference agent runs; the rest are answered "not run". A few dozen is
#: more than any task needs in one turn, and a runaway reply (10,000 calls) stays a bounded history and record.
DEFAULT_MAX_TOOL_CALLS_PER_REPLY = 32
#: Above this a "cap" no longer bounds anything a reply can cost.
MAX_TOOL_CALLS_PER_REPLY = 1024
#: Upper bound of a per-call LLM timeout (`request_timeout_seconds`); None keeps each caller's default.
MAX_REQUEST_TIMEOUT_SECONDS = 3600.0
API_KEY_PLACEHOLDER = "<PROVIDER_API_KEY>"
MASK = "**********"


class Provider(StrEnum):
    CUSTOM = "custom"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"
    TOGETHER = "together"
    OPENROUTER = "openrouter"


#: OpenAI-compatible base URLs of the hosted providers (each documents a chat-completions endpoint here).
PROVIDER_BASE_URLS: dict[Provider, str] = {
    Provider.OPENAI: "https://api.openai.com/v1",
    Provider.ANTHROPIC: "https://api.anthropic.com/v1",
    Provider.GEMINI: "https://generativelanguage.googleapis.com/v1beta/openai",
    Provider.TOGETHER: "https://api.together.xyz/v1",
    Provider.OPENROUTER: "https://openrouter.ai/api/v1",
}

#: Model-name prefixes that name their provider, for a spec-minimal config (`{model, api_key}`: provider
#: `custom`, no base_url), as the hosted product routes one; a `<provider>/` prefix names it explicitly.
MODEL_NAME_PROVIDERS: tuple[tuple[str, Provider], ...] = (
    ("gpt-", Provider.OPENAI),
    ("chatgpt-", Provider.OPENAI),
    ("o1", Provider.OPENAI),
    ("o3", Provider.OPENAI),
    ("o4", Provider.OPENAI),
    ("claude-", Provider.ANTHROPIC),
    ("gemini-", Provider.GEMINI),
)


def provider_of_model_name(model: str) -> Provider | None:
    """The hosted provider a bare model name belongs to (`gpt-4o` -> openai), or None when it names none."""
    explicit, slash, _ = model.partition("/")
    if slash and explicit in Provider.__members__.values() and explicit != Provider.CUSTOM:
        return Provider(explicit)
    return next((provider for prefix, provider in MODEL_NAME_PROVIDERS if model.startswith(prefix)), None)


class ModelConfig(StrictModel):
    """The LLM configuration of a run (spec 000 ModelConfig). `api_key` is a secret: masked in repr,
    excluded from every dump unless the caller explicitly reveals it for the one outbound request."""

    model: str = Field(min_length=1, description="LLM model identifier")
    provider: Provider = Provider.CUSTOM
    api_key: SecretStr = Field(description="credential for the provider")
    #: may carry credentials (`user:pass@`, `?key=`): repr hides it, and every writer redacts it (the run
    #: store and the warehouse through `lib.redact.strip_secrets`); requests and worker jobs carry it whole.
    base_url: str | None = Field(default=None, description="custom API base URL (proxy or self-hosted)", repr=False)
    temperature: float = Field(default=DEFAULT_TEMPERATURE, ge=MIN_TEMPERATURE, le=MAX_TEMPERATURE)
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1)
    system_prompt: str | None = None
    tool_server_url: str | None = None
    log_prob: bool = False
    summarize_every_n_turns: int = Field(default=DEFAULT_SUMMARIZE_EVERY_N_TURNS, ge=0)
    context_stride: int = Field(default=DEFAULT_CONTEXT_STRIDE, ge=1)
    #: local extension: the timeout of one chat-completion call; None keeps the caller's default (agent,
    #: judge and NPC each have their own), and requests omit it.
    request_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_REQUEST_TIMEOUT_SECONDS)
    #: local extension: tool calls of one reply that are run; None runs DEFAULT_MAX_TOOL_CALLS_PER_REPLY, and
    #: requests omit it (a hosted service need not know the field).
    max_tool_calls_per_reply: int | None = Field(default=None, ge=1, le=MAX_TOOL_CALLS_PER_REPLY)

    @property
    def tool_call_cap(self) -> int:
        """How many tool calls of one reply the reference agent runs."""
        return self.max_tool_calls_per_reply or DEFAULT_MAX_TOOL_CALLS_PER_REPLY

    @field_serializer("api_key", when_used="always")
    def _mask_key(self, value: SecretStr) -> str:
        # Serialising a ModelConfig never writes the key; outbound requests use `reveal_api_key()`.
        return MASK

    def reveal_api_key(self) -> str:
        return self.api_key.get_secret_value()

    def resolved_base_url(self) -> str:
        """The chat-completions base URL: explicit `base_url`, else the provider's default, else (provider
        `custom`) the provider the model name belongs to. Raises ValueError when none applies."""
        if self.base_url:
            return self.base_url.rstrip("/")
        provider = self.provider if self.provider != Provider.CUSTOM else provider_of_model_name(self.model)
        if provider is None:
            raise ValueError(
                f"base_url is required when provider is 'custom' and the model name ({self.model!r}) "
                "names no hosted provider"
            )
        return PROVIDER_BASE_URLS[provider]

    def echo(self) -> ModelConfigEcho:
        """What a rollout echoes back: never the key."""
        return ModelConfigEcho.model_validate(self.model_dump(exclude={"api_key"}))


class ModelConfigEcho(WireModel):
    """The rollout's echo of its model configuration (spec 000 `model_config`; hosted: `model_config_data`)."""

    model: str
    provider: str = Provider.CUSTOM.value
    temperature: float = DEFAULT_TEMPERATURE
    max_steps: int = DEFAULT_MAX_STEPS
    base_url: str | None = None
    system_prompt: str | None = None
    tool_server_url: str | None = None
    log_prob: bool = False
    summarize_every_n_turns: int = DEFAULT_SUMMARIZE_EVERY_N_TURNS
    context_stride: int = DEFAULT_CONTEXT_STRIDE
    request_timeout_seconds: float | None = None
    max_tool_calls_per_reply: int | None = None
