"""`StepLog`: what is written to stderr while the CLI's progress bar is drawn goes to the sweep's log file, while
the bar (Rich's console) still reaches the terminal."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from rich.console import Console

from eval_pipelines.lib.step_log import StepLog, sweep_log_path


def test_stderr_writes_go_to_the_log_and_the_console_to_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sweep_log_path(tmp_path / "data", "default-2026/01")
    assert path == tmp_path / "data" / "logs" / "sweep-default-2026_01.log"
    console = Console(stderr=True, force_terminal=False, width=200)
    logger = logging.getLogger("test_step_log")
    with StepLog(path, "eval-pipelines sweep x") as log:
        assert not path.exists()  # nothing written yet, no file
        # Dagster's console logger resolves sys.stderr when it emits, as this handler does.
        handler = logging.StreamHandler()
        logger.addHandler(handler)
        try:
            logger.warning("\x1b[33m1 of 1 rollouts ended in errors\x1b[0m")
        finally:
            logger.removeHandler(handler)
        print("UserWarning: a preview feature", file=sys.stderr)  # what `warnings` prints, outside pytest
        console.print("progress bar")
    assert sys.stderr is not log
    err = capsys.readouterr().err
    assert "progress bar" in err
    assert "rollouts ended" not in err and "preview feature" not in err
    text = path.read_text()
    assert text.startswith("== ") and "eval-pipelines sweep x" in text.splitlines()[0]
    assert "1 of 1 rollouts ended in errors\n" in text and "\x1b[" not in text
    assert "UserWarning: a preview feature" in text and "progress bar" not in text
    assert log.lines == text.count("\n") - 1


def test_a_quiet_run_leaves_no_file(tmp_path: Path) -> None:
    path = sweep_log_path(tmp_path, "s")
    with StepLog(path, "h") as log:
        pass
    assert log.lines == 0 and not path.exists()


def test_a_child_given_stderr_writes_into_the_log(tmp_path: Path) -> None:
    """Libraries start children with `stderr=sys.stderr` (the MCP SDK's stdio servers): that needs a descriptor,
    and the child's output lands in the log."""
    import subprocess

    path = sweep_log_path(tmp_path, "s")
    with StepLog(path, "h"):
        print("from the parent", file=sys.stderr)
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('from the child\\n')"], stderr=sys.stderr)
        assert not sys.stderr.isatty()
    text = path.read_text(encoding="utf-8")
    assert text.index("from the parent") < text.index("from the child")


async def test_an_event_loop_subprocess_can_take_it(tmp_path: Path) -> None:
    import asyncio

    path = sweep_log_path(tmp_path, "s")
    with StepLog(path, "h"):
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import sys; sys.stderr.write('async child\\n')", stderr=sys.stderr
        )
        assert await child.wait() == 0
    assert "async child" in path.read_text(encoding="utf-8")


def test_bytes_written_as_click_writes_them_are_logged_as_text(tmp_path: Path) -> None:
    """Dagster announces a new instance id with `click.secho` of bytes; with no binary buffer to find, click hands
    them to `write`, which failed the sweep's first run on a fresh instance."""
    import click

    path = sweep_log_path(tmp_path, "s")
    with StepLog(path, "h"):
        click.secho(b"\x1b[33minstance id made\x1b[0m", err=True)
    assert "instance id made" in path.read_text(encoding="utf-8")
