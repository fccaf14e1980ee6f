"""A verifier worker starts for every run: its imports are its start-up, so they stay what it needs."""

from __future__ import annotations

import subprocess
import sys

import eval_pipelines.verifiers as verifiers


def test_the_worker_module_imports_neither_httpx_nor_the_llm_client() -> None:
    probe = (
        "import sys; import eval_pipelines.verifiers.isolation; "
        "print(sorted(m for m in ('httpx', 'eval_pipelines.llm.client', 'eval_pipelines.verifiers.rubric') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_package_still_offers_every_name() -> None:
    for name in verifiers.__all__:
        assert getattr(verifiers, name).__name__ == name
