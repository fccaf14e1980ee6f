"""The README's client section, run as written: the same shell and Python, in a directory laid out like a
clone. Two things differ, and only those: free ports instead of 8800/8900 (CI may run beside anything), and
the client venvs are the suite's own (`.venv-clients/`) instead of a fresh `pip install` per run."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipelines.lib.serving import free_port
from tests.compat.conftest import HERE, client_venv

pytestmark = pytest.mark.slow

README = HERE.parents[1] / "README.md"


def readme_block(marker: str) -> str:
    match = re.search(rf"<!-- compat:{marker} -->\n```\w+\n(.*?)```", README.read_text(), re.S)
    assert match is not None, f"README has no block marked compat:{marker}"
    return match.group(1)


def without_installs(script: str) -> str:
    """Drop the lines that create a client venv: the suite's venvs stand in for them."""
    return "\n".join(
        line for line in script.splitlines() if "python3 -m venv" not in line and "pip install" not in line
    )


def run_script(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SIMLAB_", "EVAL_SERVICE_", "PLATFORM_"))},
        "HOME": str(cwd / "home"),
        # the README's `eval-pipelines` is the installed command: this interpreter's venv first on PATH
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "EVAL_PIPELINES_DATA_DIR": str(cwd / "data"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=600)
    finally:
        # the script's background service dies with it, even when the script failed half-way
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A working directory shaped like the repository root: `.venv` and `data/`."""
    (tmp_path / ".venv").symlink_to(HERE.parents[1] / ".venv")
    (tmp_path / "data").mkdir()
    (tmp_path / "home").mkdir()
    return tmp_path


def test_the_simlab_walkthrough_runs_as_written(clone: Path) -> None:
    port = str(free_port())
    demo = clone / "simlab-demo"
    demo.mkdir()
    (demo / ".venv-simlab").symlink_to(client_venv("simlab").parent)
    script = without_installs(readme_block("simlab")).replace("8800", port)
    result = run_script(script, clone)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "Authenticated" in out and "Version: email_ops:1.0.0" in out
    assert "collinear.scenarios.email_ops.verifiers." in out
    generated = sorted((demo / "hr-tasks" / "tasks").glob("*.json"))
    assert len(generated) == 3 and all(path.stem in out for path in generated), out


def test_the_collinear_walkthrough_runs_as_written(clone: Path) -> None:
    port = str(free_port())
    (clone / ".venv-collinear").symlink_to(client_venv("collinear").parent)
    (clone / "collinear_demo.py").write_text(readme_block("collinear-python").replace("8900", port))
    script = without_installs(readme_block("collinear-shell")).replace("8900", port)
    result = run_script(script, clone)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "conversation_scores" in out and "'quality'" in out and "'safety'" in out, out
    assert "generated" in out and "[simulated]" in out, out
