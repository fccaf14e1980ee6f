"""Verifiers: the protocol, scenario verifier packages and bundles, isolated execution, the rubric judge, and
content-hash versions."""

from eval_pipelines.verifiers.bundle import BundleError, build_bundle, load_bundle, safe_extract
from eval_pipelines.verifiers.isolation import IsolatedVerifierRunner, VerifyJob, run_jobs
from eval_pipelines.verifiers.loader import (
    LoadedVerifier,
    VerifierPackage,
    load_verifier_package,
    package_version,
    verifier_version,
)
from eval_pipelines.verifiers.protocol import combine, normalise_result, run_verifier, verify_module, verify_task
from eval_pipelines.verifiers.rubric import JudgeOutcome, RubricJudge

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
