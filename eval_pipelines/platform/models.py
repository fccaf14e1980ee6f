"""The model registry behind the platform's judges and generators, and the router that calls them.

A judge's `model_name` (and a synthetic-data request's `model_id`) is looked up here. An entry names an
OpenAI-compatible endpoint (`base_url`, `model`, and `api_key_env`: the variable holding the key, read at call
time and never stored), or `base_url: sim://local` for the simulated personas, which run in-process.

Registry file (YAML or JSON), `PLATFORM_MODELS_FILE`; entries are added to or override the defaults::

    models:
      veritas: {base_url: http://localhost:8000/v1, model: Qwen/Qwen2.5-7B-Instruct, api_key_env: VLLM_API_KEY}
      my-guard: {provider: openai, model: gpt-4o-mini, api_key_env: OPENAI_API_KEY, kind: safety}
      6f0c...-uuid: {base_url: http://localhost:8000/v1, model: my-writer, api_key_env: VLLM_API_KEY}

`kind` is `quality`, `safety` or `generator`. It may be left out for the product's names (`veritas*` are
quality, `collinear_guard*` safety) and for UUID names (generators, selected by `model_id`).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.types import ChatMessage, ChatRequest
from eval_pipelines.schemas._base import StrictModel
from eval_pipelines.schemas.model_config import PROVIDER_BASE_URLS, Provider
from eval_pipelines.schemas.platform import QUALITY_MODELS, SAFETY_MODELS, SIM_SYNTH_MODEL_ID
from eval_pipelines.schemas.sweep import SIMULATED_BASE_URL
from eval_pipelines.sim.platform import PLATFORM_PERSONAS, SIM_QUALITY_JUDGE, SIM_SAFETY_JUDGE, SIM_SYNTH

logger = logging.getLogger(__name__)

MODELS_FILE_ENV = "PLATFORM_MODELS_FILE"
DEFAULT_MAX_TOKENS = 1024


class ModelKind(StrEnum):
    QUALITY = "quality"
    SAFETY = "safety"
    GENERATOR = "generator"


class ModelConfigError(ValueError):
    """The registry configuration is invalid; the message names the source and the entry."""


class ModelUnavailable(RuntimeError):
    """A registered model cannot be called (e.g. its key variable is not set). The message holds no secret."""


class RegisteredModel(StrictModel):
    model: str = Field(min_length=1, description="model identifier sent to the endpoint, or the persona name")
    provider: Provider = Provider.CUSTOM
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    kind: ModelKind | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1)

    @property
    def is_simulated(self) -> bool:
        return self.base_url == SIMULATED_BASE_URL

    def resolved_base_url(self) -> str:
        if self.base_url:
            return self.base_url
        return PROVIDER_BASE_URLS[self.provider]

    @model_validator(mode="after")
    def _reachable(self) -> RegisteredModel:
        if self.is_simulated:
            if self.model not in PLATFORM_PERSONAS:
                raise ValueError(f"no simulated persona named {self.model!r}; known: {sorted(PLATFORM_PERSONAS)}")
        elif self.provider == Provider.CUSTOM and not self.base_url:
            raise ValueError("base_url is required when provider is 'custom'")
        return self


def _is_uuid(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name.lower()
    except ValueError:
        return False


def _default_kind(name: str) -> ModelKind | None:
    if name in SAFETY_MODELS:
        return ModelKind.SAFETY
    if name in QUALITY_MODELS:
        return ModelKind.QUALITY
    if _is_uuid(name):
        return ModelKind.GENERATOR
    return None


def _simulated(persona: str, kind: ModelKind) -> RegisteredModel:
    return RegisteredModel(model=persona, base_url=SIMULATED_BASE_URL, kind=kind)


DEFAULT_MODELS: dict[str, RegisteredModel] = {
    "veritas": _simulated(SIM_QUALITY_JUDGE, ModelKind.QUALITY),
    "veritas_nano": _simulated(SIM_QUALITY_JUDGE, ModelKind.QUALITY),
    "collinear_guard": _simulated(SIM_SAFETY_JUDGE, ModelKind.SAFETY),
    "collinear_guard_nano": _simulated(SIM_SAFETY_JUDGE, ModelKind.SAFETY),
    SIM_SYNTH_MODEL_ID: _simulated(SIM_SYNTH, ModelKind.GENERATOR),
}


class ModelRegistry:
    """model_name (or synth model_id) -> RegisteredModel, every entry with its kind resolved."""

    def __init__(self, entries: Mapping[str, RegisteredModel]) -> None:
        resolved: dict[str, RegisteredModel] = {}
        for name, entry in entries.items():
            key = name.lower() if _is_uuid(name) else name
            kind = entry.kind or _default_kind(key)
            if kind is None:
                raise ModelConfigError(f"model {name!r}: set `kind` to quality, safety or generator")
            if kind == ModelKind.GENERATOR and not _is_uuid(key):
                raise ModelConfigError(
                    f"model {name!r}: a generator is selected by model_id, so its name must be a UUID"
                )
            resolved[key] = entry.model_copy(update={"kind": kind})
        self._entries = resolved

    @classmethod
    def defaults(cls) -> ModelRegistry:
        return cls(DEFAULT_MODELS)

    @classmethod
    def parse(cls, data: Any, *, source: str) -> dict[str, RegisteredModel]:
        if isinstance(data, Mapping) and "models" in data:
            data = data["models"]
        if not isinstance(data, Mapping):
            raise ModelConfigError(f"{source}: expected a mapping of model name -> entry")
        entries: dict[str, RegisteredModel] = {}
        for name, raw in data.items():
            try:
                entries[str(name)] = RegisteredModel.model_validate(raw)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '<entry>'}: {e['msg']}" for e in exc.errors()
                )
                raise ModelConfigError(f"{source}: model {name!r}: {problems}") from None
        return entries

    @classmethod
    def from_file(cls, path: Path, *, base: Mapping[str, RegisteredModel] | None = None) -> ModelRegistry:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelConfigError(f"{path}: cannot read the model registry ({exc.strerror})") from None
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise ModelConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None
        return cls({**(base if base is not None else DEFAULT_MODELS), **cls.parse(data or {}, source=str(path))})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ModelRegistry:
        env = os.environ if environ is None else environ
        path = env.get(MODELS_FILE_ENV)
        return cls.from_file(Path(path)) if path else cls.defaults()

    def with_models(self, entries: Mapping[str, RegisteredModel]) -> ModelRegistry:
        return ModelRegistry({**self._entries, **entries})

    def get(self, name: str) -> RegisteredModel | None:
        return self._entries.get(name.lower() if _is_uuid(name) else name)

    def names(self, kind: ModelKind | None = None) -> list[str]:
        return sorted(n for n, e in self._entries.items() if kind is None or e.kind == kind)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __repr__(self) -> str:
        return f"ModelRegistry({self.names()})"


class ModelRouter:
    """Sends a chat request to a registered model: simulated personas in-process, others through ChatClient.

    One ChatClient per endpoint, key, timeout and concurrency, reused for the app's lifetime; the key is read
    from the environment when the client is made and lives only inside it. A request may ask for its own
    timeout and concurrency (an assessment run's judges, from the sweep): the calls that share them share
    one client, whose limiter holds the calls waiting for a slot before any attempt's timeout starts.
    """

    def __init__(
        self, registry: ModelRegistry, *, timeout_seconds: float, retry: RetryPolicy, max_concurrency: int
    ) -> None:
        self.registry = registry
        self._timeout = timeout_seconds
        self._retry = retry
        self._max_concurrency = max_concurrency
        self._clients: dict[tuple[str, str | None, int, float, int], ChatClient] = {}

    def _client(
        self, entry: RegisteredModel, timeout_seconds: float | None = None, max_concurrency: int | None = None
    ) -> ChatClient:
        key: str | None = None
        if entry.api_key_env:
            key = os.environ.get(entry.api_key_env)
            if not key:
                raise ModelUnavailable(f"environment variable {entry.api_key_env} (the model's key) is not set")
        timeout = timeout_seconds or self._timeout
        concurrency = max_concurrency or self._max_concurrency
        # hash(), not the key itself: the cache key must not be a second copy of the secret.
        cache_key = (entry.resolved_base_url(), entry.api_key_env, hash(key), timeout, concurrency)
        client = self._clients.get(cache_key)
        if client is None:
            client = ChatClient(
                entry.resolved_base_url(),
                key,
                timeout_seconds=timeout,
                retry=self._retry,
                max_concurrency=concurrency,
            )
            self._clients[cache_key] = client
        return client

    def check_available(self, name: str) -> None:
        """Raise ModelUnavailable now rather than mid-stream when the model cannot be called."""
        entry = self.registry.get(name)
        if entry is None:
            raise ModelUnavailable(f"model {name!r} is not in the registry")
        if not entry.is_simulated and entry.api_key_env and not os.environ.get(entry.api_key_env):
            raise ModelUnavailable(f"environment variable {entry.api_key_env} (the model's key) is not set")

    async def complete(
        self,
        name: str,
        messages: list[ChatMessage],
        *,
        user: str | None = None,
        timeout_seconds: float | None = None,
        max_concurrency: int | None = None,
    ) -> str:
        """The reply text of model `name`; raises ModelUnavailable or an `LLMError` subclass. `timeout_seconds`
        bounds each HTTP attempt, `max_concurrency` the calls in flight with these settings (None: the router's)."""
        entry = self.registry.get(name)
        if entry is None:
            raise ModelUnavailable(f"model {name!r} is not in the registry")
        request = ChatRequest(
            model=entry.model,
            messages=messages,
            temperature=entry.temperature,
            max_tokens=entry.max_tokens,
            user=user,
        )
        if entry.is_simulated:
            return PLATFORM_PERSONAS[entry.model](request)
        completion = await self._client(entry, timeout_seconds, max_concurrency).complete(request)
        return completion.text

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()
