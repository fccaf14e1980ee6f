"""NPCs of the chat tool server: profiles and secrets in the state, the model that plays them, transcripts.

What lives where:
- NPC profiles and task secrets are STATE (`state["npcs"]`): seeded, snapshotted, readable by verifiers.
  A secret never reaches an observation except through the NPC's own reply.
- The model that plays the NPCs (the run's `user_model_config`) is RUNTIME: an `NpcResponder` held in the
  workspace's in-memory runtime settings (or the server's default), never in state, snapshots or logs.
- An NPC remembers only the last `NPC_MEMORY_MESSAGES` messages of its DM room (the product's capped
  history); the room itself keeps every message for verifiers and transcripts.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import Field, SecretStr, ValidationError, field_validator

from eval_pipelines.lib.redact import redact_url
from eval_pipelines.lib.retry import RetryPolicy
from eval_pipelines.llm.client import ChatClient, normalise_base_url
from eval_pipelines.llm.errors import LLMError
from eval_pipelines.llm.types import ChatMessage, ChatRequest
from eval_pipelines.schemas._base import StrictModel
from eval_pipelines.schemas.model_config import MAX_TEMPERATURE, MIN_TEMPERATURE, ModelConfig
from eval_pipelines.schemas.scenarios import NpcProfile
from eval_pipelines.sim.npc import SIM_NPC, NpcPersona, persona_system_prompt, sim_npc_persona

NPCS = "npcs"
ROOMS = "rooms"
MESSAGES = "messages"
SETTINGS = "settings"
#: the key of an NPC (in a chat seed's `npcs[]` item and in the state) holding its task's `NpcPersonality`
PERSONALITY = "personality"
DM_ROOM_PREFIX = "dm-"

NPC_MEMORY_MESSAGES = 20
MAX_NPC_REPLY_CHARS = 2000
DEFAULT_NPC_TIMEOUT_SECONDS = 20.0
MAX_NPC_TIMEOUT_SECONDS = 120.0
DEFAULT_NPC_TEMPERATURE = 0.7
#: the key of `POST /workspaces/{id}/configure` that sets the NPC model.
NPC_MODEL_SETTING = "npc_model"

PROFILE_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
_PROFILE_ID_RE = re.compile(PROFILE_ID_PATTERN)

ROLE_AGENT = "agent"
ROLE_NPC = "npc"


class NpcReplyError(Exception):
    """The NPC model gave no usable reply. The message is safe to show: no key, no prompt, no secret."""


class NpcConfigError(ValueError):
    """Runtime settings that cannot be used; the message names the field and never echoes a value."""


def dm_room_id(profile_id: str) -> str:
    return f"{DM_ROOM_PREFIX}{profile_id}"


def npc_display_name(npc: Mapping[str, Any]) -> str:
    name = f"{npc.get('first_name', '')} {npc.get('last_name', '')}".strip()
    return name or str(npc.get("email") or npc.get("profile_id") or "unknown")


# -- secrets ---------------------------------------------------------------------------------------------


class NpcSecret(StrictModel):
    """`{"value": "4827#", "reveal_when": ["door code", "keypad"]}`: what the NPC hides and what unlocks it.

    Without `reveal_when` (SimLab's plain-text `secret`) nothing unlocks it: the NPC acts on it and never tells.
    An empty list is refused: it is far more likely a topic forgotten than a secret meant never to be told."""

    value: str = Field(min_length=1)
    reveal_when: list[str] | None = Field(default=None, min_length=1)

    @field_validator("reveal_when")
    @classmethod
    def _topics_not_blank(cls, topics: list[str] | None) -> list[str] | None:
        if topics is None:
            return None
        cleaned = [" ".join(t.split()) for t in topics]
        if not all(cleaned):
            raise ValueError("reveal_when topics must not be blank")
        return cleaned


def _safe_validation_message(exc: ValidationError) -> str:
    # `str(ValidationError)` repeats the input value, which may be an API key or a secret.
    parts = []
    for error in exc.errors(include_input=False, include_url=False):
        loc = ".".join(str(p) for p in error["loc"]) or "<root>"
        parts.append(f"{loc}: {error['msg']}")
    return "; ".join(parts)


def parse_secret(raw: Any, where: str) -> dict[str, Any]:
    """A validated secret as stored in the state; ValueError naming `where` and the field."""
    try:
        secret = NpcSecret.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(f"{where}: {_safe_validation_message(exc)}") from None
    return secret.model_dump()


# -- personas --------------------------------------------------------------------------------------------


def persona_for(npc: Mapping[str, Any], colleague: str) -> NpcPersona:
    secret = npc.get("secret") if isinstance(npc.get("secret"), dict) else None
    raw_personality = npc.get(PERSONALITY)
    personality: Mapping[str, Any] = raw_personality if isinstance(raw_personality, Mapping) else {}
    return NpcPersona(
        name=npc_display_name(npc),
        occupation=str(npc.get("occupation") or ""),
        email=str(npc.get("email") or ""),
        public_info=str(npc.get("public_info") or ""),
        colleague=colleague,
        secret=str(secret["value"]) if secret else None,
        reveal_when=tuple(secret.get("reveal_when") or ()) if secret else (),
        part=str(personality.get("role") or ""),
        traits=str(personality.get("traits") or ""),
        situation=str(personality.get("context") or ""),
        style=str(personality.get("quirks") or ""),
    )


def persona_messages(
    npc: Mapping[str, Any], colleague: str, history: Sequence[Mapping[str, Any]], new_message: str
) -> list[ChatMessage]:
    """System persona prompt, the NPC's capped memory of the room, then the colleague's new message.

    The NPC is the `assistant`; everyone else in its DM room (the agent) is the `user`.
    """
    npc_email = str(npc.get("email") or "")
    messages = [ChatMessage.system(persona_system_prompt(persona_for(npc, colleague)))]
    keep = NPC_MEMORY_MESSAGES - 1  # the new message counts towards the memory
    remembered = list(history)[len(history) - keep :] if len(history) > keep else list(history)
    for item in remembered:
        role = "assistant" if item.get("sender") == npc_email else "user"
        messages.append(ChatMessage(role=role, content=str(item.get("text") or "")))
    messages.append(ChatMessage.user(new_message))
    return messages


# -- the model that plays the NPCs -----------------------------------------------------------------------


class NpcResponder(Protocol):
    """Plays an NPC: the persona conversation in, the NPC's reply text out (NpcReplyError on failure)."""

    @property
    def model(self) -> str: ...

    async def reply(self, messages: list[ChatMessage]) -> str: ...


def _clean_reply(text: str, who: str) -> str:
    reply = text.strip()
    if not reply:
        raise NpcReplyError(f"the NPC model returned an empty reply for {who}")
    return reply[:MAX_NPC_REPLY_CHARS]


class SimulatedNpcResponder:
    """The deterministic `sim-npc`, called in-process: the default when a run configures no NPC model."""

    @property
    def model(self) -> str:
        return SIM_NPC

    async def reply(self, messages: list[ChatMessage]) -> str:
        return _clean_reply(sim_npc_persona(ChatRequest(model=SIM_NPC, messages=messages)), "the simulated NPC")

    def __repr__(self) -> str:
        return "SimulatedNpcResponder()"


class NpcModelSettings(StrictModel):
    """Any OpenAI-compatible chat model playing the NPCs. The key is a SecretStr: masked in repr and dumps."""

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_key: SecretStr | None = None
    temperature: float = Field(default=DEFAULT_NPC_TEMPERATURE, ge=MIN_TEMPERATURE, le=MAX_TEMPERATURE)
    timeout_seconds: float = Field(default=DEFAULT_NPC_TIMEOUT_SECONDS, gt=0, le=MAX_NPC_TIMEOUT_SECONDS)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return normalise_base_url(value)

    @classmethod
    def from_model_config(
        cls, config: ModelConfig, timeout_seconds: float = DEFAULT_NPC_TIMEOUT_SECONDS
    ) -> NpcModelSettings:
        return cls(
            base_url=config.resolved_base_url(),
            model=config.model,
            api_key=SecretStr(config.reveal_api_key()),
            temperature=config.temperature,
            timeout_seconds=timeout_seconds,
        )

    def public(self) -> dict[str, Any]:
        """What may be echoed or logged: no key."""
        return {
            "base_url": redact_url(self.base_url),
            "model": self.model,
            "temperature": self.temperature,
            "timeout_seconds": self.timeout_seconds,
        }


def parse_npc_settings(raw: Any) -> NpcModelSettings:
    if not isinstance(raw, Mapping):
        raise NpcConfigError(f"{NPC_MODEL_SETTING}: expected an object with base_url, model, api_key, temperature")
    try:
        return NpcModelSettings.model_validate(dict(raw))
    except ValidationError as exc:
        raise NpcConfigError(f"{NPC_MODEL_SETTING}: {_safe_validation_message(exc)}") from None


def npc_configure_settings(config: ModelConfig, timeout_seconds: float | None = None) -> dict[str, Any]:
    """The body of `POST /workspaces/{id}/configure` for a run's `user_model_config`.

    It carries the revealed key because the tool server must call the model: send it, never store or log it.
    The NPC's per-reply timeout: `timeout_seconds`, else the model's `request_timeout_seconds` (capped, because
    the agent's tool call waits on the reply), else the NPC default.
    """
    timeout = timeout_seconds or min(
        config.request_timeout_seconds or DEFAULT_NPC_TIMEOUT_SECONDS, MAX_NPC_TIMEOUT_SECONDS
    )
    settings = NpcModelSettings.from_model_config(config, timeout_seconds=timeout)
    body = settings.model_dump(exclude={"api_key"})
    body["api_key"] = config.reveal_api_key()
    return {NPC_MODEL_SETTING: body}


class ChatModelNpcResponder:
    """An OpenAI-compatible model behind `llm.ChatClient`, bounded by one overall timeout per reply.

    A client is opened per reply: replies are rare (one per agent DM), and an httpx client is bound to the
    event loop it was first used on, while this responder may serve from more than one loop.
    """

    def __init__(self, settings: NpcModelSettings, retry: RetryPolicy | None = None) -> None:
        self.settings = settings
        # Two attempts at most: the agent's tool call is waiting, and its own timeout is not much longer.
        self.retry = retry or RetryPolicy.for_llm(max_attempts=2, base_delay=0.2, max_delay=2.0)

    @property
    def model(self) -> str:
        return self.settings.model

    def __repr__(self) -> str:
        return f"ChatModelNpcResponder(model={self.settings.model!r}, base_url={redact_url(self.settings.base_url)!r})"

    async def reply(self, messages: list[ChatMessage]) -> str:
        settings = self.settings
        request = ChatRequest(model=settings.model, messages=messages, temperature=settings.temperature)
        key = settings.api_key.get_secret_value() if settings.api_key else None
        try:
            async with ChatClient(
                settings.base_url, key, timeout_seconds=settings.timeout_seconds, retry=self.retry, max_concurrency=1
            ) as client:
                completion = await asyncio.wait_for(client.complete(request), timeout=settings.timeout_seconds)
        except TimeoutError:
            raise NpcReplyError(
                f"the NPC model {settings.model!r} did not reply within {settings.timeout_seconds:g}s"
            ) from None
        except LLMError as exc:
            # LLMError messages are already scrubbed of the key; the prompt (and the secret) never enter them.
            raise NpcReplyError(f"the NPC model failed: {exc.message}") from None
        return _clean_reply(completion.text, f"model {settings.model!r}")


# -- seeding and transcripts -------------------------------------------------------------------------------


def npc_seed_item(
    profiles: Iterable[NpcProfile | Mapping[str, Any]], secrets: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The chat seed item the engine appends for a task: its NPC profiles and its `npc_secrets`."""
    items = [p.model_dump() if isinstance(p, NpcProfile) else dict(p) for p in profiles]
    item: dict[str, Any] = {"npcs": items}
    if secrets:
        item["npc_secrets"] = dict(secrets)
    return item


def _final_state(state: Mapping[str, Any]) -> Mapping[str, Any]:
    # Accept the chat state itself, a `/snapshot` body, or the engine's {"initial", "final"} pair.
    if isinstance(state.get("final"), Mapping):
        return _final_state(state["final"])
    if isinstance(state.get("state"), Mapping):
        return _final_state(state["state"])
    return state


def npc_transcripts(state: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """profile_id -> the DM conversation with that NPC, oldest first: `{role: agent|npc, content, timestamp}`.

    Every seeded NPC is listed, an NPC nobody wrote to with an empty list.
    """
    chat = _final_state(state)
    npcs = chat.get(NPCS) or {}
    messages = list((chat.get(MESSAGES) or {}).values())
    transcripts: dict[str, list[dict[str, Any]]] = {}
    for profile_id in sorted(npcs):
        npc = npcs[profile_id]
        room = dm_room_id(profile_id)
        in_room = sorted(
            (m for m in messages if m.get("room_id") == room),
            key=lambda m: (str(m.get("timestamp", "")), str(m.get("id", ""))),
        )
        transcripts[profile_id] = [
            {
                "role": ROLE_NPC if m.get("sender") == npc.get("email") else ROLE_AGENT,
                "content": str(m.get("text") or ""),
                "timestamp": str(m.get("timestamp") or ""),
            }
            for m in in_room
        ]
    return transcripts


def withheld_secrets(state: Mapping[str, Any]) -> list[str]:
    """NPCs that were asked about their secret's topic and never revealed it: the persona failed, not the agent.

    Read from the final chat state (the seeded secrets and the DM transcripts), so the verdict rests on what
    happened, not on any message text an error produced. One sentence per such NPC.
    """
    chat = _final_state(state)
    npcs = chat.get(NPCS) or {}
    transcripts = npc_transcripts(chat)
    reasons: list[str] = []
    for profile_id, npc in sorted(npcs.items()):
        secret = npc.get("secret") if isinstance(npc, Mapping) else None
        if not isinstance(secret, Mapping) or not secret.get("value"):
            continue
        topics = [str(t).lower() for t in secret.get("reveal_when") or []]
        turns = transcripts.get(profile_id, [])
        asked = next((t for t in topics for m in turns if m["role"] == ROLE_AGENT and t in m["content"].lower()), None)
        revealed = any(m["role"] == ROLE_NPC and str(secret["value"]) in m["content"] for m in turns)
        if asked is not None and not revealed:
            reasons.append(f"NPC {profile_id!r} was asked about {asked!r} and never revealed what its persona holds")
    return reasons


def valid_profile_id(profile_id: Any) -> bool:
    return isinstance(profile_id, str) and bool(_PROFILE_ID_RE.match(profile_id))


__all__ = [
    "DM_ROOM_PREFIX",
    "NPC_MEMORY_MESSAGES",
    "NPC_MODEL_SETTING",
    "ChatModelNpcResponder",
    "NpcConfigError",
    "NpcModelSettings",
    "NpcReplyError",
    "NpcResponder",
    "NpcSecret",
    "SimulatedNpcResponder",
    "dm_room_id",
    "npc_configure_settings",
    "npc_seed_item",
    "npc_transcripts",
    "parse_npc_settings",
    "persona_messages",
    "withheld_secrets",
]
