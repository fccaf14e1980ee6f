"""One ChatClient per endpoint and key, shared by every rollout that uses it (connection reuse, one bound)."""

from __future__ import annotations

import hashlib

from eval_pipelines.llm.client import ChatClient
from eval_pipelines.schemas.model_config import ModelConfig


class ChatClientPool:
    def __init__(self, timeout_seconds: float = 120.0, max_concurrency: int = 64) -> None:
        self.timeout_seconds = timeout_seconds
        self.max_concurrency = max_concurrency
        self._clients: dict[tuple[str, str, float | None], ChatClient] = {}

    def for_model(self, config: ModelConfig) -> ChatClient:
        # The key takes part in the identity only as a digest, so the pool's keys never hold the secret.
        key_digest = hashlib.sha256(config.reveal_api_key().encode()).hexdigest()
        identity = (config.resolved_base_url(), key_digest, config.request_timeout_seconds)
        if identity not in self._clients:
            self._clients[identity] = ChatClient.from_model_config(
                config,
                timeout_seconds=config.request_timeout_seconds or self.timeout_seconds,
                max_concurrency=self.max_concurrency,
            )
        return self._clients[identity]

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
