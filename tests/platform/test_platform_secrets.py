"""Tokens and RAG keys stay out of the store, the logs, reprs and errors; how tokens are issued and configured."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from eval_pipelines.clients.platform import PlatformAuthError, PlatformClient, PlatformForbiddenError
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.platform import PlatformSettings, TokenRegistry, create_platform_app, issue_token
from eval_pipelines.platform.auth import TokenConfigError, token_digest
from eval_pipelines.platform.models import SIM_SYNTH_MODEL_ID
from eval_pipelines.schemas.platform import AssessRunRequest, JudgeCreateRequest, SynthDataRequest
from tests.platform.conftest import BENIGN_ROW, HARMFUL_ROW, NO_RETRY, OTHER_SPACE, SPACE, Platform

RAG_KEY = "rag-secret-5f1e0c9a7b3d2e4f"


async def test_tokens_and_rag_keys_never_reach_the_store_or_the_logs(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with platform.client() as client:
        upload = await client.upload_platform([BENIGN_ROW, HARMFUL_ROW], dataset_name="secrets", space_id=SPACE)
        await client.upload_dataset([BENIGN_ROW], dataset_name="general", space_id=SPACE)
        judge = await client.create_judge(
            JudgeCreateRequest(
                judge_name="rag-judge",
                space_id=uuid.UUID(SPACE),
                model_name="veritas",
                rag_api_key=SecretStr(RAG_KEY),
                rag_index="docs",
                rag_host="https://index.example.io",
            )
        )
        await client.assess_run(
            AssessRunRequest(
                dataset_id=uuid.UUID(upload.data.dataset_id),
                space_id=uuid.UUID(SPACE),
                judge_ids=[uuid.UUID(judge.id)],
                name="with-secrets",
            )
        )
        await client.generate_synthetic(
            SynthDataRequest(model_id=uuid.UUID(SIM_SYNTH_MODEL_ID), multiplier=2, examples=[BENIGN_ROW], prompt="p")
        )
    async with platform.client(platform.other_token) as other:
        with pytest.raises(PlatformForbiddenError) as forbidden:
            await other.upload_dataset([BENIGN_ROW], dataset_name="x", space_id=SPACE)
    async with platform.client("tok-wrong-" + uuid.uuid4().hex) as stranger:
        with pytest.raises(PlatformAuthError) as unauthorised:
            await stranger.upload_dataset([BENIGN_ROW], dataset_name="x", space_id=SPACE)

    stored = b"".join(p.read_bytes() for p in Path(platform.settings.data_dir).rglob("*") if p.is_file())
    # The scan sees what was written (rows, the RAG index, the run name), main file and WAL alike.
    for visible in (b"quarterly report", b"index.example.io", b"with-secrets"):
        assert visible in stored
    for secret in (platform.token, platform.other_token, RAG_KEY):
        assert secret.encode() not in stored
        assert secret not in caplog.text
        assert secret not in str(forbidden.value) and secret not in str(unauthorised.value)
    assert "rag-judge" in caplog.text  # the logs were captured


def test_client_repr_and_errors_hide_the_token() -> None:
    client = PlatformClient("http://127.0.0.1:9", "tok-very-secret-value", retry=NO_RETRY)
    assert "tok-very-secret-value" not in repr(client) and "tok-very-secret-value" not in str(client)


async def test_issued_token_works_and_its_file_holds_only_a_digest(tmp_path: Path) -> None:
    tokens_file = tmp_path / "secrets" / "platform_tokens"
    issued = issue_token(tokens_file, SPACE)
    fresh = issue_token(tokens_file)  # a new space
    text = tokens_file.read_text()
    assert issued.token not in text and fresh.token not in text
    assert f"sha256:{token_digest(issued.token)}:{SPACE}" in text
    assert (tokens_file.stat().st_mode & 0o777) == 0o600
    assert issued.token not in repr(issued)
    assert uuid.UUID(fresh.space_id) and fresh.space_id != SPACE

    registry = TokenRegistry.from_env({"PLATFORM_TOKENS_FILE": str(tokens_file)})
    settings = PlatformSettings(data_dir=tmp_path / "data", tokens=registry)
    with BackgroundServer(create_platform_app(settings)) as server:
        async with PlatformClient(server.url, issued.token, retry=NO_RETRY) as client:
            result = await client.upload_dataset([BENIGN_ROW], dataset_name="d", space_id=SPACE)
            assert len(result.rows) == 1
            with pytest.raises(PlatformForbiddenError):
                await client.upload_dataset([BENIGN_ROW], dataset_name="d", space_id=fresh.space_id)


def test_tokens_from_the_environment_grant_their_spaces() -> None:
    registry = TokenRegistry.from_env({"PLATFORM_TOKENS": f"alpha:{SPACE}, alpha:{OTHER_SPACE.upper()},beta:{SPACE}"})
    assert registry.spaces_for("alpha") == {SPACE, OTHER_SPACE}
    assert registry.spaces_for("beta") == {SPACE}
    assert registry.spaces_for("gamma") is None
    assert "alpha" not in repr(registry)


@pytest.mark.parametrize(
    "entry",
    ["supersecret-token:not-a-uuid", "supersecret-token", "sha256:abc:" + SPACE, "super secret:" + SPACE],
)
def test_token_config_errors_never_echo_the_token(entry: str) -> None:
    with pytest.raises(TokenConfigError) as caught:
        TokenRegistry.parse(entry, source="PLATFORM_TOKENS")
    assert "supersecret" not in str(caught.value) and "super secret" not in str(caught.value)
    assert "PLATFORM_TOKENS entry 1" in str(caught.value)


def test_health_needs_no_token(platform: Platform) -> None:
    assert httpx.get(platform.url + "/health").json() == {"status": "healthy"}
