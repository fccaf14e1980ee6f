"""A `provider: custom` model without `api_key_env` (a local vLLM, Ollama or llama.cpp server that takes no key)
runs a sweep and is scored, and its endpoint never sees an Authorization header; a hosted provider still needs
the variable, and a named variable that is unset still stops the sweep with exit 2."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pydantic import ValidationError

from eval_pipelines.cli import EXIT_USER_ERROR, main
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.sweeps import model_config_for
from eval_pipelines.schemas.sweep import SweepModel
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from tests.reliability.support_runs import make_dagster_home

TASKS = ("email_ops_001", "email_ops_003")


class RecordingHeaders:
    """ASGI wrapper that records, per chat-completion request, whether it carried an Authorization header."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.authorization: list[str | None] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            headers = dict(scope.get("headers") or [])
            value = headers.get(b"authorization")
            self.authorization.append(None if value is None else value.decode())
        await self.app(scope, receive, send)


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("DAGSTER_HOME", str(make_dagster_home(tmp_path / "dagster_home")))
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(tmp_path / "data"))
    yield tmp_path


@pytest.mark.slow
def test_a_keyless_custom_model_runs_and_is_scored(isolated: Path, serve: Any) -> None:
    endpoint = RecordingHeaders(create_sim_app(ReferenceBook.from_catalog(ScenarioCatalog())))
    server = serve(endpoint)
    config = isolated / "keyless.yaml"
    config.write_text(
        "name: keyless\n"
        'scenarios: ["email_ops:1.0.0"]\n'
        f"task_ids: [{', '.join(TASKS)}]\n"
        "rollout_count: 1\n"
        "models:\n"
        f"  - {{name: local-model, model: sim-oracle, provider: custom, base_url: '{server.url}/v1'}}\n"
    )
    assert main(["sweep", "--config", str(config), "--skip-assessment", "--sweep-id", "keyless-1"]) == 0
    assert endpoint.authorization, "the model endpoint was never called"
    assert set(endpoint.authorization) == {None}  # no header at all, not an empty or placeholder bearer
    con = duckdb.connect(str(isolated / "data" / "eval.duckdb"), read_only=True)
    try:
        rows = con.execute("select model_name, n, passes, n_errors, pass_rate from pass_rates").fetchall()
    finally:
        con.close()
    # sim-oracle solves both tasks: every rollout was verified and passed, none errored
    assert rows == [("local-model", len(TASKS), len(TASKS), 0, 1.0)]


def test_a_keyless_model_config_carries_no_key() -> None:
    model = SweepModel.model_validate(
        {"name": "ollama", "model": "qwen2.5:7b", "base_url": "http://127.0.0.1:11434/v1"}
    )
    assert model.api_key_env is None
    assert model_config_for(model).reveal_api_key() == ""


def test_a_hosted_provider_still_needs_its_key_variable() -> None:
    with pytest.raises(ValidationError) as raised:
        SweepModel.model_validate({"name": "gpt", "model": "gpt-4o-mini", "provider": "openai"})
    assert "api_key_env is required for provider 'openai'" in str(raised.value)


def test_a_named_variable_that_is_unset_is_still_exit_2(
    isolated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EP_KEYLESS_UNSET_XYZ", raising=False)
    config = isolated / "named.yaml"
    config.write_text(
        'name: named\nscenarios: ["email_ops:1.0.0"]\nmodels:\n'
        "  - {name: local, model: m, provider: custom, base_url: 'http://127.0.0.1:9/v1', "
        "api_key_env: EP_KEYLESS_UNSET_XYZ}\n"
    )
    assert main(["sweep", "--config", str(config)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert f"{config}: models[local].api_key_env: environment variable EP_KEYLESS_UNSET_XYZ is not set" in err
    assert "Traceback" not in err
