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
