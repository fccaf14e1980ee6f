"""Verifiers: the protocol, loading of scenario verifier packages, and content-hash versions."""

from eval_pipelines.verifiers.loader import (
    LoadedVerifier,
    VerifierPackage,
    load_verifier_package,
    package_version,
    verifier_version,
)
from eval_pipelines.verifiers.protocol import combine, normalise_result, run_verifier, verify_task

__all__ = [
    "LoadedVerifier",
    "VerifierPackage",
    "combine",
    "load_verifier_package",
    "normalise_result",
    "package_version",
    "run_verifier",
    "verifier_version",
    "verify_task",
]
