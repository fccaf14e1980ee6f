"""The README's user sections, run as written by someone who installed the wheel: a fresh venv, an empty folder,
no checkout on the path. The wheel is built from the committed tree (`git archive HEAD`) and put in the empty
folder under the name the install block gives it; the venv's `bin` is first on PATH (as after `source
venv/bin/activate`), and each `bash` block of every section above "For contributors" (but "Two commands", the
clone's own) runs in its own shell, in order: the install block in the empty folder, the others in the project it
made (`cd my-evals`).

How a block is fenced says how it runs: `bash` runs and must exit 0; `bash server` runs until stopped, so it is
started, must still be running (no traceback) after a while, and is stopped. `bash endpoint` (needs a real model
endpoint), `bash external` (installs another tool from PyPI), `bash clone` (reads files of the repository) and the
blocks the compat suite runs as written (`<!-- compat:... -->`, tests/compat/) are left out, and listed.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_pipelines.lib.serving import free_port

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CONTRIBUTORS_HEADING = "## For contributors"
#: Sections above "For contributors" that are a clone's commands (`make sweep`, `make test`), not a user's.
CLONE_SECTIONS = ("## Two commands",)
LEFT_OUT = ("endpoint", "external", "clone")
#: How long a `bash server` block must keep running to count as started.
SERVER_SECONDS = 15.0


@dataclass(frozen=True)
class Block:
    section: str
    kind: str  # "" (run), "server", or one of LEFT_OUT, or "compat"
    script: str


def user_blocks(text: str) -> list[Block]:
    """The `bash` blocks of the README's user sections, in order."""
    user_part = text.split(f"\n{CONTRIBUTORS_HEADING}\n", 1)[0]
    blocks: list[Block] = []
    section = ""
    previous = ""
    lines = iter(user_part.splitlines())
    for line in lines:
        if line.startswith("## "):
            section = line
        fence = re.fullmatch(r"```(\w*)\s*(.*)", line)
        if fence is None:
            previous = line if line.strip() else previous
            continue
        body = []
        for inner in lines:
            if inner.startswith("```"):
                break
            body.append(inner)
        language, tag = fence.group(1), fence.group(2).strip()
        if language == "bash" and section not in CLONE_SECTIONS:
            kind = "compat" if previous.startswith("<!-- compat:") else tag
            blocks.append(Block(section, kind, "\n".join(body) + "\n"))
        previous = ""
    return blocks


def test_the_user_sections_use_the_installed_command_and_a_real_install_line() -> None:
    text = README.read_text(encoding="utf-8")
    user_part = text.split(f"\n{CONTRIBUTORS_HEADING}\n", 1)[0]
    assert CONTRIBUTORS_HEADING in text
    blocks = user_blocks(text)
    assert {b.kind for b in blocks} <= {"", "server", "compat", *LEFT_OUT}, {b.kind for b in blocks}
    for block in blocks:
        if block.kind in (*LEFT_OUT, "compat"):
            continue
        assert ".venv/bin/" not in block.script, block
        assert not re.search(r"^\s*make\b", block.script, re.M), block
        assert not re.search(r"<[A-Za-z][\w ]*>", block.script), block  # no placeholder to fill in
    assert "<owner>" not in user_part
    install = blocks[0]
    assert install.section == "## Install" and install.kind == ""
    assert re.match(r"pip install \./eval_pipelines-[\d.]+-py3-none-any\.whl\n", install.script)
    # the contributor section keeps the clone's two commands
    assert "make sweep" in text and "make test" in text


def _run_block(block: Block, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", block.script],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=900)
    finally:
        with contextlib.suppress(ProcessLookupError):  # what the block left in the background dies with it
            os.killpg(process.pid, signal.SIGTERM)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _run_server(block: Block, cwd: Path, env: dict[str, str], log: Path) -> tuple[bool, str]:
    """Start a server block, keep its stdin open (an MCP stdio server waits on it), and stop it after a while:
    (still running, its output up to the stop)."""
    with log.open("w") as out:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", block.script],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + SERVER_SECONDS
            while time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.5)
            running = process.poll() is None
            before_stop = log.read_text(errors="replace")  # what it said on its own, before it is interrupted
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return running, before_stop


@pytest.fixture(scope="module")
def empty_folder_with_wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    """(the empty folder holding only the wheel, the fresh venv, the environment of an activated venv)."""
    root = tmp_path_factory.mktemp("readme")
    source = root / "source"
    source.mkdir()
    # The committed tree (a consistent snapshot while the work tree is being edited), as a clone would build it.
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    folder = root / "folder"
    folder.mkdir()
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("EVAL_PIPELINES_", "DAGSTER_", "PYTHON", "SIMLAB_", "PLATFORM_", "EVAL_SERVICE_"))
        and key != "VIRTUAL_ENV"
    }
    (root / "home").mkdir()
    env.update(
        HOME=str(root / "home"),
        VIRTUAL_ENV=str(venv),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        NO_COLOR="1",
        COLUMNS="200",
    )
    yield folder, venv, env


@pytest.mark.slow
def test_every_user_command_block_runs_as_written_from_the_installed_wheel(
    empty_folder_with_wheel: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    folder, venv, env = empty_folder_with_wheel
    blocks = user_blocks(README.read_text(encoding="utf-8"))
    install, rest = blocks[0], blocks[1:]
    (wheel,) = folder.glob("eval_pipelines-*.whl")
    expected = re.match(r"pip install \./(\S+)", install.script)
    assert expected is not None
    if wheel.name != expected.group(1):  # the version in the README is the package's
        pytest.fail(f"the install block names {expected.group(1)}, the wheel is {wheel.name}")
    assert sorted(p.name for p in folder.iterdir()) == [wheel.name]  # an empty folder but for the wheel

    done = _run_block(install, folder, env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "sim-oracle" in done.stdout and "my_email_ops:0.1.0" in done.stdout
    assert "run_command" in done.stdout  # doctor's sandbox line
    project = folder / "my-evals"
    assert (project / "data" / "eval.duckdb").is_file()
    # the production configuration ships in the wheel (`init --postgres`, `init --celery`)
    site = next((venv / "lib").glob("python3*/site-packages"))
    for shipped in ("postgres/dagster.yaml", "celery/dagster_celery_config.py"):
        assert (site / "eval_pipelines" / "builtin" / "deploy" / shipped).is_file(), shipped

    ran, started, left_out = [], [], []
    port = str(free_port())
    for index, block in enumerate(rest):
        # Another service may hold 8800 on a shared machine: the one port the blocks name is moved, as the
        # compat suite does.
        runnable = Block(block.section, block.kind, block.script.replace("8800", port))
        if block.kind in (*LEFT_OUT, "compat"):
            left_out.append(f"{block.section} ({block.kind}): {block.script.splitlines()[0]}")
        elif block.kind == "server":
            running, output = _run_server(runnable, project, env, tmp_path / f"server-{index}.log")
            assert running and "Traceback" not in output, f"{block.section}:\n{block.script}\n{output[-4000:]}"
            started.append(block.script.splitlines()[0])
        else:
            result = _run_block(runnable, project, env)
            out = result.stdout + result.stderr
            assert result.returncode == 0, f"{block.section}:\n{block.script}\n{out[-4000:]}"
            assert "Traceback" not in out, f"{block.section}:\n{out[-4000:]}"
            ran.append(block.script.splitlines()[0])
    print("ran:", *ran, "started and stopped:", *started, "left out:", *left_out, sep="\n  ")
    assert len(ran) >= 6 and len(started) >= 4
    # what the blocks say they write
    assert (project / "exports" / "rollouts.jsonl").is_file()
    assert (project / "data" / "reports" / "report.html").is_file()
