"""A sweep run through the CLI with a canary API key leaves the key nowhere on disk, and user errors exit 2."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from eval_pipelines.cli import main
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from tests.reliability.support_runs import make_dagster_home
from tests.support.stored_files import plain_bytes

CANARY = "sk-canary-7f1c2e9a4b"
URL_SECRET = "urlpass-3e8f1a"
QUERY_SECRET = "querykey-9b2c7d"


class RecordingAuth:
    """ASGI wrapper that records the Authorization headers a model endpoint receives."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            self.seen.append(headers.get(b"authorization", b"").decode())
        await self.app(scope, receive, send)


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("DAGSTER_HOME", str(make_dagster_home(tmp_path / "dagster_home")))
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(tmp_path / "data"))
    yield tmp_path


def _all_text(root: Path) -> Iterator[tuple[Path, str]]:
    for path in root.rglob("*"):
        if path.is_file():
            yield path, plain_bytes(path).decode("latin-1")
            if path.suffix == ".parquet":
                # Pages are zstd-compressed: search the decoded values as well as the raw bytes.
                yield path, str(pq.read_table(path).to_pylist())


def test_canary_key_reaches_the_model_and_nothing_else(
    isolated: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_server = RecordingAuth(create_sim_app(ReferenceBook.from_catalog(ScenarioCatalog())))
    server = serve(model_server)
    monkeypatch.setenv("EP_CANARY_KEY", CANARY)
    config = isolated / "canary.yaml"
    config.write_text(
        "name: canary\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        "task_ids: [email_ops_001, email_ops_003]\n"
        "rollout_count: 2\n"
        "models:\n"
        f"  - {{name: canary-model, model: sim-oracle, provider: custom, base_url: '{server.url}/v1', "
        "api_key_env: EP_CANARY_KEY}\n"
    )
    assert main(["sweep", "--config", str(config)]) == 0
    assert f"Bearer {CANARY}" in model_server.seen  # the key was really used
    leaks = [
        str(p)
        for root in (isolated / "data", isolated / "dagster_home")
        for p, text in _all_text(root)
        if CANARY in text
    ]
    assert leaks == []
    assert any((isolated / "data" / "warehouse" / "rollouts").rglob("*.parquet"))


def test_user_errors_name_the_file_and_field(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def own_folder(name: str) -> Path:
        folder = isolated / name.removesuffix(".yaml")
        folder.mkdir()
        return folder / name

    bad_yaml = own_folder("bad.yaml")
    bad_yaml.write_text("name: x\nscenarios: [\n")
    assert main(["sweep", "--config", str(bad_yaml)]) == 2
    assert str(bad_yaml) in capsys.readouterr().err

    bad_field = own_folder("field.yaml")
    bad_field.write_text(
        "name: x\nscenarios: [a]\nrollout_count: 0\nmodels:\n  - {name: m, model: m, base_url: sim://local}\n"
    )
    assert main(["sweep", "--config", str(bad_field)]) == 2
    err = capsys.readouterr().err
    assert "rollout_count" in err and "Traceback" not in err

    provider = own_folder("provider.yaml")
    provider.write_text(
        'name: x\nscenarios: ["email_ops:1.0.0"]\nmodels:\n  - {name: m, model: m, provider: nope, api_key_env: K}\n'
    )
    assert main(["sweep", "--config", str(provider)]) == 2
    assert "models.0.provider" in capsys.readouterr().err

    missing_env = own_folder("env.yaml")
    missing_env.write_text(
        'name: x\nscenarios: ["email_ops:1.0.0"]\n'
        "models:\n  - {name: m, model: m, base_url: 'http://127.0.0.1:9/v1', api_key_env: EP_UNSET_VARIABLE_XYZ}\n"
    )
    assert main(["sweep", "--config", str(missing_env)]) == 2
    assert "EP_UNSET_VARIABLE_XYZ" in capsys.readouterr().err

    unknown = own_folder("unknown.yaml")
    unknown.write_text('name: x\nscenarios: ["nope:1"]\nmodels:\n  - {name: m, model: m, base_url: sim://local}\n')
    assert main(["sweep", "--config", str(unknown)]) == 2
    assert "scenarios[0]" in capsys.readouterr().err


def test_credentials_in_a_base_url_are_used_and_written_nowhere(
    isolated: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`user:secret@` and `?key=` in a base_url reach the endpoint (they are how some proxies and providers take
    keys) and appear in no file: not the run store, the warehouse, the traces, the logs or Dagster's storage."""
    seen: list[str] = []
    sim = create_sim_app(ReferenceBook.from_catalog(ScenarioCatalog()))

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(scope.get("query_string", b"").decode() + " " + str(dict(scope.get("headers") or [])))
        await sim(scope, receive, send)

    server = serve(recording)
    monkeypatch.setenv("EP_CANARY_KEY", CANARY)
    host = server.url.removeprefix("http://")
    config = isolated / "userinfo.yaml"
    config.write_text(
        "name: userinfo\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        "task_ids: [email_ops_001]\n"
        "rollout_count: 1\n"
        "models:\n"
        f"  - {{name: proxied, model: sim-oracle, base_url: 'http://proxyuser:{URL_SECRET}@{host}/v1?key={QUERY_SECRET}',"
        " api_key_env: EP_CANARY_KEY}\n"
    )
    assert main(["sweep", "--config", str(config), "--skip-assessment"]) == 0
    assert any(f"key={QUERY_SECRET}" in s for s in seen)  # the query key really reached the endpoint
    leaks = [
        (str(p), secret)
        for root in (isolated / "data", isolated / "dagster_home")
        for p, text in _all_text(root)
        for secret in (URL_SECRET, QUERY_SECRET)
        if secret in text
    ]
    assert leaks == []
