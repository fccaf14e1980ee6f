"""Virtualenvs made once from a list of pip installs and cached by that list's hash.

`cached_venv(folder, installs)` returns the venv's interpreter, making the venv first when it is missing: under a
file lock, so concurrent processes make it once, and with a marker written last, so a venv left half-made by a
killed install is detected and made again. Callers choose the folder (`<cache>/venvs/<name>-<install_digest>`):
a changed list gets a new folder, and the same list the same venv on every run of the machine.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

#: Written into a venv once everything is installed: its absence means a half-made venv.
MARKER_NAME = ".eval-pipelines-complete"
#: Lines of pip's output a failed install quotes.
PIP_ERROR_LINES = 15


class VenvInstallError(RuntimeError):
    """A venv could not be made (pip failed, or could not run); the message quotes pip's last lines."""


def install_digest(installs: Sequence[Sequence[str]]) -> str:
    """A short hash of this interpreter's version and the install steps: the cache key of their venv."""
    text = json.dumps([sys.version_info[:2], [list(step) for step in installs]])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def is_complete(venv: Path) -> bool:
    return (venv / MARKER_NAME).is_file()


def cached_venv(
    venv: Path, installs: Sequence[Sequence[str]], *, label: str, notice: Callable[[str], None] | None = None
) -> Path:
    """The interpreter of the venv at `venv`, made first (once, announced through `notice`) by running each of
    `installs` as `pip install <step>`. Raises VenvInstallError, quoting pip, when it cannot be made."""
    if is_complete(venv):
        return python_of(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # another process may be making it: wait, then use theirs
        if is_complete(venv):
            return python_of(venv)
        if notice is not None:
            notice(f"installing {label} into {venv}: once")
        shutil.rmtree(venv, ignore_errors=True)  # half-made by an install that was killed
        # This interpreter's pip installs into the new venv (`--python`): a venv without a pip of its own is made
        # in a fraction of the time, and holds only what was asked for.
        own_pip = importlib.util.find_spec("pip") is not None
        _run(
            [sys.executable, "-m", "venv", *(["--without-pip"] if own_pip else []), str(venv)],
            label,
            "creating the venv",
        )
        pip = (
            [sys.executable, "-m", "pip", "--python", str(python_of(venv))]
            if own_pip
            else [str(python_of(venv)), "-m", "pip"]
        )
        for step in installs:
            command = [*pip, "install", "--disable-pip-version-check", "--no-input", *step]
            _run(command, label, "pip install " + " ".join(step))
        (venv / MARKER_NAME).write_text(json.dumps({"label": label, "installs": [list(s) for s in installs]}) + "\n")
    return python_of(venv)


def _run(argv: list[str], label: str, what: str) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise VenvInstallError(f"cannot install {label}: {what}: {exc}") from None
    if result.returncode != 0:
        lines = (result.stdout + result.stderr).strip().splitlines()[-PIP_ERROR_LINES:]
        tail = "\n".join("    " + line for line in lines)
        raise VenvInstallError(f"cannot install {label}: {what} failed (status {result.returncode}):\n{tail}")
