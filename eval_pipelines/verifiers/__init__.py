"""Verifiers: the protocol, scenario verifier packages and bundles, isolated execution, the rubric judge, and
content-hash versions.

The names below are imported on first use: a verifier worker process imports `verifiers.isolation`, and
importing every sibling with it (the rubric judge brings the LLM client and httpx) doubled its start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eval_pipelines.verifiers.bundle import BundleError, build_bundle, load_bundle, safe_extract
    from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifyJob, run_jobs
    from eval_pipelines.verifiers.loader import (
        LoadedVerifier,
        VerifierPackage,
        load_verifier_package,
        package_version,
        verifier_version,
    )
    from eval_pipelines.verifiers.protocol import (
        combine,
        normalise_result,
        run_verifier,
        verify_module,
        verify_task,
    )
    from eval_pipelines.verifiers.rubric import JudgeOutcome, RubricJudge

_HOMES = {
    "BundleError": "bundle",
    "build_bundle": "bundle",
    "load_bundle": "bundle",
    "safe_extract": "bundle",
    "IsolatedVerifierRunner": "isolation",
    "VerifyJob": "isolation",
    "run_jobs": "isolation",
    "LoadedVerifier": "loader",
    "VerifierPackage": "loader",
    "load_verifier_package": "loader",
    "package_version": "loader",
    "verifier_version": "loader",
    "combine": "protocol",
    "normalise_result": "protocol",
    "run_verifier": "protocol",
    "verify_module": "protocol",
    "verify_task": "protocol",
    "JudgeOutcome": "rubric",
    "RubricJudge": "rubric",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "BundleError",
    "IsolatedVerifierRunner",
    "JudgeOutcome",
    "LoadedVerifier",
    "RubricJudge",
    "VerifierPackage",
    "VerifyJob",
    "build_bundle",
    "combine",
    "load_bundle",
    "load_verifier_package",
    "normalise_result",
    "package_version",
    "run_jobs",
    "run_verifier",
    "safe_extract",
    "verifier_version",
    "verify_module",
    "verify_task",
]
