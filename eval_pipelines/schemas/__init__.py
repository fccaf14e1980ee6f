"""Pydantic models of every resource in the three specs: the one source of field names, defaults and limits.

This package imports nothing else from the project.
"""

from eval_pipelines.schemas.artifacts import ARTIFACTS_VERSION, RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig, ModelConfigEcho, Provider
from eval_pipelines.schemas.runs import (
    Rollout,
    RolloutPhase,
    RolloutResult,
    RolloutStatus,
    Run,
    RunLaunchRequest,
    RunLaunchResponse,
    StatusEvent,
    TaskOverride,
    TerminationReason,
)
from eval_pipelines.schemas.scenarios import NpcProfile, Rubric, SeedDataFile, Task, Template
from eval_pipelines.schemas.sweep import SweepConfig, SweepModel
from eval_pipelines.schemas.tools import (
    StateDiff,
    StepRequest,
    StepResponse,
    ToolCall,
    ToolCallResult,
    ToolDefinition,
)
from eval_pipelines.schemas.verifiers import VerifierOutcome, VerifierResult

__all__ = [
    "ARTIFACTS_VERSION",
    "ModelConfig",
    "ModelConfigEcho",
    "NpcProfile",
    "Provider",
    "Rollout",
    "RolloutPhase",
    "RolloutResult",
    "RolloutStatus",
    "Rubric",
    "Run",
    "RunArtifacts",
    "RunLaunchRequest",
    "RunLaunchResponse",
    "SeedDataFile",
    "StateDiff",
    "StatusEvent",
    "StepRequest",
    "StepResponse",
    "SweepConfig",
    "SweepModel",
    "Task",
    "TaskOverride",
    "Template",
    "TerminationReason",
    "ToolCall",
    "ToolCallResult",
    "ToolDefinition",
    "VerifierOutcome",
    "VerifierResult",
]
