"""The README's "Bring a SimLab bundle" and "Export results" commands, run as written in a directory shaped
like a clone (its own data and scenarios directories, so the repository's are not touched)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def readme_block(marker: str) -> str:
    match = re.search(rf"<!-- readme:{marker} -->\n```\w+[^\n]*\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert match is not None, f"README has no block marked readme:{marker}"
    return match.group(1)


def test_the_bundle_walkthrough_imports_and_sweeps_and_the_export_commands_run(tmp_path: Path) -> None:
    for name in (".venv", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = {
        **os.environ,
        # the README's `eval-pipelines` is the installed command: this interpreter's venv first on PATH
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "EVAL_PIPELINES_DATA_DIR": str(tmp_path / "data"),
        "EVAL_PIPELINES_SCENARIOS_DIR": str(tmp_path / "scenarios"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", readme_block("simlab-bundle") + readme_block("export")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "scenario ops_bundle:1.0.0: 1 task(s)" in out
    assert "  ask_projector: runnable" in out  # each task's verdict is printed
    # the table's rows: scenario | model | tasks | n | passes | ...
    rows = {cells[2].split()[0]: cells for line in out.splitlines() if len(cells := re.split(r"\s*[│|]\s*", line)) > 6}
    passes = {model: rows[model][5] for model in ("sim-oracle", "sim-noop", "simlab-agent")}
    assert passes == {"sim-oracle": "1", "sim-noop": "0", "simlab-agent": "1"}, out
    # the table's footer links the sweep's rollouts in the viewer
    assert re.search(r"eval-pipelines view, then http://127\.0\.0\.1:8765/rollouts\?sweep=simlab-bundle-\d{8}", out), (
        out
    )
    # "Export results", run after that sweep: every format wrote what it says
    exports = tmp_path / "exports"
    lines = (exports / "rollouts.jsonl").read_text().splitlines()
    assert len(lines) == 3 and {json.loads(line)["model_name"] for line in lines} == set(passes)
    assert len(list((exports / "inspect").glob("*.json"))) == 3
    assert (exports / "parquet" / "rollouts.parquet").is_file()
