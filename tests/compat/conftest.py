"""The vendor's own clients against the local services, started as the README says.

Each client lives in a venv of its own under `.venv-clients/<client>/`, installed from PyPI on first use
and reinstalled when its requirements file changes; nothing of theirs is a dependency of this project. The
services are the real servers (`eval-pipelines serve eval-service|platform`) in their own processes, on
loopback ports, with keys made for the session.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.lib.serving import free_port

HERE = Path(__file__).resolve().parent
VENVS = HERE.parents[1] / ".venv-clients"
EVAL_PIPELINES = Path(sys.executable).parent / "eval-pipelines"
#: pip flags per client: SimLab 0.2.0 declares Python >=3.13 and runs on 3.11.
PIP_FLAGS: Mapping[str, Sequence[str]] = {"simlab": ("--ignore-requires-python",), "collinear": (), "atif": ()}
SERVICE_START_SECONDS = 60.0


def client_venv(name: str) -> Path:
    """The venv of one client, (re)installed when its requirements changed. Returns the venv's bin directory."""
    requirements = HERE / f"requirements-{name}.txt"
    venv = VENVS / name
    stamp = venv / f".installed-{hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]}"
    if not stamp.is_file():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                *PIP_FLAGS[name],
                "-r",
                str(requirements),
            ],
            check=True,
        )
        stamp.touch()
    return venv / "bin"


@dataclass
class Served:
    """A local service in its own process."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def serve(args: Sequence[str], env: Mapping[str, str], log: Path, probe: str, headers: Mapping[str, str]) -> Served:
    """Start `eval-pipelines serve …` and wait until `probe` answers 200."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(EVAL_PIPELINES), "serve", *args, "--host", "127.0.0.1", "--port", str(port)],
            env={**os.environ, **env},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    served = Served(url, process, log)
    deadline = time.monotonic() + SERVICE_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{args[0]} exited with {process.returncode}:\n{served.log_text()}")
        try:
            if httpx.get(url + probe, headers=dict(headers), timeout=2.0).status_code == 200:
                return served
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    served.stop()
    raise RuntimeError(f"{args[0]} did not answer {probe} within {SERVICE_START_SECONDS:.0f} s:\n{served.log_text()}")


@dataclass(frozen=True)
class EvalServiceUnderTest:
    url: str
    write_key: str
    read_key: str
    data_dir: Path
    scenarios_dir: Path


@pytest.fixture(scope="session")
def eval_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalServiceUnderTest]:
    """`eval-pipelines serve eval-service` with a data dir of its own, over a copy of the built-in scenarios."""
    root = tmp_path_factory.mktemp("eval-service")
    shutil.copytree(builtin_scenarios_dir(), root / "scenarios")
    with served_eval_service(root) as service:
        yield service


@contextmanager
def served_eval_service(root: Path) -> Iterator[EvalServiceUnderTest]:
    """`eval-pipelines serve eval-service` over the scenarios in `root / "scenarios"`, its data in `root / "data"`."""
    write_key, read_key = f"wk-{secrets.token_hex(12)}", f"rk-{secrets.token_hex(12)}"
    scenarios_dir = root / "scenarios"
    served = serve(
        [
            "eval-service",
            "--data-dir",
            str(root / "data"),
            "--scenarios-dir",
            str(scenarios_dir),
            "--log-level",
            "warning",
        ],
        {"EVAL_SERVICE_API_KEYS": f"{write_key}:write,{read_key}:read"},
        root / "service.log",
        "/v1/auth/verify",
        {"API-Key": read_key},
    )
    try:
        yield EvalServiceUnderTest(served.url, write_key, read_key, root / "data", scenarios_dir)
    finally:
        served.stop()


@dataclass(frozen=True)
class PlatformUnderTest:
    url: str
    token: str
    space_id: str


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformUnderTest]:
    """`eval-pipelines serve platform` with one token granting one space, and its simulated judges."""
    root = tmp_path_factory.mktemp("platform")
    token, space = f"tok-{secrets.token_hex(12)}", str(uuid.uuid4())
    served = serve(
        ["platform", "--data-dir", str(root / "data"), "--log-level", "warning"],
        {"PLATFORM_TOKENS": f"{token}:{space}"},
        root / "platform.log",
        "/openapi.json",
        {},
    )
    try:
        yield PlatformUnderTest(served.url, token, space)
    finally:
        served.stop()


def run_client(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, timeout: float = 180.0, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a client command with a clean HOME (no user config) and the given variables."""
    home = cwd / ".home"
    home.mkdir(exist_ok=True)
    clean = {key: value for key, value in os.environ.items() if not key.startswith(("SIMLAB_", "COLLINEAR_"))}
    return subprocess.run(
        list(argv),
        env={**clean, "HOME": str(home), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200", **env},
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def load_json(path: Path) -> object:
    return json.loads(path.read_text())
