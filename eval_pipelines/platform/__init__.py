"""The local assessment platform (spec 002): datasets, judges, assessment runs, conversation judging and
synthetic data behind Bearer-token auth, with simulated judges and a generator for offline use."""

from eval_pipelines.platform.app import create_platform_app
from eval_pipelines.platform.auth import IssuedToken, TokenRegistry, issue_token
from eval_pipelines.platform.config import PlatformSettings
from eval_pipelines.platform.models import SIM_SYNTH_MODEL_ID, ModelKind, ModelRegistry, RegisteredModel
from eval_pipelines.platform.serve import run_platform

__all__ = [
    "SIM_SYNTH_MODEL_ID",
    "IssuedToken",
    "ModelKind",
    "ModelRegistry",
    "PlatformSettings",
    "RegisteredModel",
    "TokenRegistry",
    "create_platform_app",
    "issue_token",
    "run_platform",
]
