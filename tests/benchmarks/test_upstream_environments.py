"""Cached upstream venvs: made once from a pinned list (here a local wheel, no network), announced in one line,
re-made when half-made, and a failing pip install is a user error quoting pip (CLI exit 2)."""

from __future__ import annotations

import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipelines import cli
from eval_pipelines.benchmarks import catalog
from eval_pipelines.benchmarks.environments import (
    MARKER_NAME,
    EnvironmentInstallError,
    EnvironmentSpec,
    ensure,
    is_installed,
    venv_dir,
)
from eval_pipelines.inputs.paths import CACHE_DIR_ENV
from tests.benchmarks.upstream_fake import FakeAdapter


def _wheel(folder: Path) -> Path:
    """A minimal pure-Python wheel of `fakeupstream` 1.0, installable with `pip install --no-index`."""
    info = "fakeupstream-1.0.dist-info"
    files = {
        "fakeupstream/__init__.py": "VALUE = 42\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: fakeupstream\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    path = folder / "fakeupstream-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def broken_adapter(tmp_path: Path) -> Iterator[FakeAdapter]:
    adapter = FakeAdapter()
    adapter.environment = EnvironmentSpec(
        name="fakebench",
        label="fakebench 1.0",
        installs=(("--no-index", str(tmp_path / "missing-1.0-py3-none-any.whl")),),
    )
    catalog.register(adapter)
    yield adapter
    catalog.unregister(adapter.name)


def test_a_venv_is_made_once_and_remade_when_half_made(cache: Path, tmp_path: Path) -> None:
    spec = EnvironmentSpec(
        name="fakeupstream", label="fakeupstream 1.0", installs=(("--no-index", str(_wheel(tmp_path))),)
    )
    notices: list[str] = []
    python = ensure(spec, notice=notices.append)
    assert python.is_relative_to(cache / "venvs") and is_installed(spec)
    assert notices == [f"installing fakeupstream 1.0 into {venv_dir(spec)}: once"]
    imported = subprocess.run([python, "-c", "import fakeupstream; print(fakeupstream.VALUE)"], capture_output=True)
    assert imported.stdout.strip() == b"42"
    assert ensure(spec, notice=notices.append) == python and len(notices) == 1  # cached

    (venv_dir(spec) / MARKER_NAME).unlink()  # as an install killed before its end leaves it
    assert not is_installed(spec)
    assert ensure(spec, notice=notices.append) == python and len(notices) == 2
    assert (venv_dir(spec) / MARKER_NAME).is_file()


def test_a_failing_install_quotes_pip_and_the_cli_exits_2(
    cache: Path, broken_adapter: FakeAdapter, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(EnvironmentInstallError, match=r"missing-1\.0-py3-none-any\.whl") as raised:
        ensure(broken_adapter.environment, notice=lambda _: None)
    assert "cannot install fakebench 1.0: pip install" in str(raised.value)
    assert not is_installed(broken_adapter.environment)

    assert cli.main(["benchmarks", "install", "fakebench"]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "installing fakebench 1.0 into" in err and "cannot install fakebench 1.0" in err
    assert "Traceback" not in err
    assert cli.main(["benchmarks", "list"]) == 0
    out = capsys.readouterr().out
    assert "fakebench 1.0: fakebench 1.0, not installed" in out and "fakebench_telecom: not supported yet" in out
