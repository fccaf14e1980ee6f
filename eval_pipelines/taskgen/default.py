"""The generator the service (and the CLI) uses: LLM-driven when a model endpoint is configured, otherwise the
deterministic schema-driven generator (offline fallback).

Choosing per request:

- `model: "schema"` always uses the schema-driven generator, and so does a toolset that changes nothing (its
  tasks are questions about the data, which only the schema-driven generator plans);
- otherwise, with an endpoint configured, the LLM-driven generator runs on `model` (or the endpoint's default
  model when the request names none);
- with no endpoint configured, the schema-driven generator runs and `filter_summary["model_ignored"]` says why
  when the request named a model.

Environment: `EVAL_TASKGEN_BASE_URL` (an OpenAI-compatible `/v1` URL), `EVAL_TASKGEN_API_KEY` (optional),
`EVAL_TASKGEN_MODEL` (the default model), `EVAL_TASKGEN_TIMEOUT_SECONDS` (per model call, default 120).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from eval_pipelines.llm.client import ChatClient
from eval_pipelines.schemas.taskgen import TaskGenRequest, TaskGenResults
from eval_pipelines.taskgen.bundle import write_bundle
from eval_pipelines.taskgen.errors import TaskGenRequestError
from eval_pipelines.taskgen.gates import QualityGates
from eval_pipelines.taskgen.llm_generator import LLMTaskGenerator
from eval_pipelines.taskgen.request import parse_request
from eval_pipelines.taskgen.schema_generator import SchemaTaskGenerator
from eval_pipelines.taskgen.toolset import normalise_toolset

SCHEMA_MODEL = "schema"
BASE_URL_ENV = "EVAL_TASKGEN_BASE_URL"
API_KEY_ENV = "EVAL_TASKGEN_API_KEY"
MODEL_ENV = "EVAL_TASKGEN_MODEL"
TIMEOUT_ENV = "EVAL_TASKGEN_TIMEOUT_SECONDS"
DEFAULT_LLM_TIMEOUT_SECONDS = 120.0
#: why a model named for a read-only toolset was not used.
READ_ONLY_NOTE = (
    "no tool of the toolset changes state; the schema-driven generator's questions were used "
    "(the LLM-driven generator plans state changes)"
)


@dataclass(frozen=True)
class LLMEndpoint:
    base_url: str
    api_key: SecretStr | None = None
    default_model: str | None = None
    timeout_seconds: float = DEFAULT_LLM_TIMEOUT_SECONDS

    def __repr__(self) -> str:
        return f"LLMEndpoint(base_url={self.base_url!r}, default_model={self.default_model!r})"

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> LLMEndpoint | None:
        env = os.environ if environ is None else environ
        base_url = (env.get(BASE_URL_ENV) or "").strip()
        if not base_url:
            return None
        key = env.get(API_KEY_ENV) or None
        return cls(
            base_url=base_url,
            api_key=SecretStr(key) if key else None,
            default_model=(env.get(MODEL_ENV) or "").strip() or None,
            timeout_seconds=float(env.get(TIMEOUT_ENV) or DEFAULT_LLM_TIMEOUT_SECONDS),
        )


class DefaultTaskGenerator:
    """The service's TaskGenerator: `async generate(request, progress) -> TaskGenResults`."""

    def __init__(self, endpoint: LLMEndpoint | None = None, *, gates: QualityGates | None = None) -> None:
        self.endpoint = endpoint
        self.gates = gates or QualityGates()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> DefaultTaskGenerator:
        return cls(LLMEndpoint.from_environment(environ))

    async def generate(self, request: TaskGenRequest, progress: Callable[[str], None]) -> TaskGenResults:
        endpoint = self.endpoint
        model = request.model or (endpoint.default_model if endpoint else None)
        read_only = _read_only(request)
        if endpoint is None or model is None or model == SCHEMA_MODEL or read_only:
            results = await SchemaTaskGenerator(self.gates).generate(request, progress)
            if request.model not in (None, SCHEMA_MODEL) and results.filter_summary is not None:
                results.filter_summary["model_ignored"] = (
                    READ_ONLY_NOTE
                    if read_only and endpoint is not None
                    else f"no model endpoint is configured ({BASE_URL_ENV}); the schema-driven generator was used"
                )
            return results
        key = endpoint.api_key.get_secret_value() if endpoint.api_key else None
        async with ChatClient(endpoint.base_url, key, timeout_seconds=endpoint.timeout_seconds) as client:
            generator = LLMTaskGenerator(client, model, gates=self.gates)
            return await generator.generate(request, progress)


def _read_only(request: TaskGenRequest) -> bool:
    """Whether no tool of the request changes state (a bad toolset is left for the generator to report)."""
    try:
        return not any(tool.mutates for tool in normalise_toolset(request.toolset).tools)
    except TaskGenRequestError:
        return False


async def generate_scenario(
    request: TaskGenRequest | Mapping[str, Any],
    scenarios_dir: Path,
    scenario_id: str,
    *,
    generator: DefaultTaskGenerator | SchemaTaskGenerator | LLMTaskGenerator | None = None,
    progress: Callable[[str], None] = lambda _text: None,
    name: str | None = None,
    overwrite: bool = False,
) -> tuple[TaskGenResults, Path]:
    """Generate from a request (field-named TaskGenRequestError on bad input) and write the scenario folder:
    what the CLI command does in-process."""
    parsed = parse_request(request)
    chosen = generator or DefaultTaskGenerator.from_environment()
    results = await chosen.generate(parsed, progress)
    label = name or (parsed.scenario.name if parsed.scenario and parsed.scenario.name else None)
    return results, write_bundle(results, scenarios_dir, scenario_id, name=label, overwrite=overwrite)
