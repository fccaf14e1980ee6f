"""Task generation (spec 000 `/v1/task-gen`): turn a toolset into tasks, instructions, rubrics, verifiers and a
skills document, with quality gates on every verifier, and write the result as a scenario folder.

- `SchemaTaskGenerator`: deterministic, from the tool schemas alone (offline; the fallback).
- `LLMTaskGenerator`: any OpenAI-compatible model, one prompt per step.
- `DefaultTaskGenerator`: picks between them (see `default`); the service's default generator.
- `write_bundle`, `toolset_from_server` / `afetch_toolset`, `parse_request` and `check_toolset` (field-named
  errors).

A toolset's tools are served by the built-in server whose tools they are, schemas included; any other toolset
(a user's own) by a stand-in simulated from its schemas (`schema_server`), so its tasks are replayed and gated
too. A toolset that changes nothing gets questions about its data (`questions`).
"""

from eval_pipelines.taskgen.bundle import BundleError, write_bundle
from eval_pipelines.taskgen.context import check_toolset
from eval_pipelines.taskgen.default import (
    SCHEMA_MODEL,
    DefaultTaskGenerator,
    LLMEndpoint,
    generate_scenario,
)
from eval_pipelines.taskgen.errors import TaskGenFailed, TaskGenRequestError
from eval_pipelines.taskgen.gates import QualityGates
from eval_pipelines.taskgen.llm_generator import LLMTaskGenerator
from eval_pipelines.taskgen.presets import PRESETS, preset_names
from eval_pipelines.taskgen.request import Diversity, apportion, parse_request, resolve_request
from eval_pipelines.taskgen.schema_generator import SchemaTaskGenerator
from eval_pipelines.taskgen.toolset import afetch_toolset, toolset_from_server

__all__ = [
    "PRESETS",
    "SCHEMA_MODEL",
    "BundleError",
    "DefaultTaskGenerator",
    "Diversity",
    "LLMEndpoint",
    "LLMTaskGenerator",
    "QualityGates",
    "SchemaTaskGenerator",
    "TaskGenFailed",
    "TaskGenRequestError",
    "afetch_toolset",
    "apportion",
    "check_toolset",
    "generate_scenario",
    "parse_request",
    "preset_names",
    "resolve_request",
    "toolset_from_server",
    "write_bundle",
]
