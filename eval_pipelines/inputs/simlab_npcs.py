"""The NPCs of a SimLab bundle: its profiles (`npcs/profiles.json`) and each task's `npcs` entries, as the
scenario's NPC profiles, the task's NPC secrets and a chat seed that gives an NPC its personality in the task.

SimLab reads a task's `npcs[]` two ways. `{id}` names a profile (calendar accounts, group-channel members,
`tasks info`). An entry with any of `traits`, `context`, `quirks` is also played in conversation by its NPC chat
(`npc_send_message`, `npc_list_contacts` in the `npc-chat` namespace) as `name` (default: the id, title-cased),
a `role`, and those three, with no profile needed. Here the chat server plays such an NPC: its personality goes
into the task's chat seed (`schemas.scenarios.NpcPersonality`), a profile is made from its entry when the bundle
has none, and the task gets the chat server. A `secret` (SimLab's is plain text, read by its hosted NPCs) goes to
the task's `npc_secrets`, which are never listed. Whatever has no place is noted with its field named.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from eval_pipelines.inputs.simlab_seeds import Note
from eval_pipelines.schemas.scenarios import NpcPersonality, is_plain_name

PROFILES_FILE = "npcs/profiles.json"
#: An entry with any of these is one SimLab's NPC chat plays (`_CHAT_PERSONALITY_FIELDS`, npc_chat/activation.py).
CHAT_PERSONALITY_KEYS = ("traits", "context", "quirks")
#: The key of a chat seed's `npcs[]` item holding its personality (the chat server's `toolservers.npc.PERSONALITY`).
PERSONALITY_SEED_KEY = "personality"
_ENTRY_KEYS = {"id", "name", "role", "secret", *CHAT_PERSONALITY_KEYS}
_REQUIRED_PROFILE_KEYS = ("profile_id", "first_name", "last_name", "email")
#: profile key -> the key it stands in for when that one is empty
_FALLBACK_PROFILE_KEYS = {"title": "occupation", "bio": "public_info"}
#: SimLab's name of an NPC's chat handle, then the project's (a bundle written from a scenario has that one)
_HANDLE_KEYS = ("rocketchat_username", "username")
_PROFILE_KEYS = {*_REQUIRED_PROFILE_KEYS, "occupation", "public_info", *_HANDLE_KEYS, *_FALLBACK_PROFILE_KEYS}
#: the address of an NPC the bundle gives no profile (SimLab's seeding falls back to `<id>@<domain>` too)
MADE_UP_EMAIL_DOMAIN = "example.com"
_NOT_ID_CHARS = re.compile(r"[^a-z0-9]+")


def profiles_from(raw: list[Any], note: Note) -> dict[str, dict[str, Any]]:
    """profile_id -> the NPC profile (`schemas.scenarios.NpcProfile` fields) of each usable profile; a profile
    missing a required key is left out, and every other key that has no place is noted once with its count."""
    profiles: dict[str, dict[str, Any]] = {}
    left_out: Counter[str] = Counter()
    for pos, item in enumerate(raw):
        missing = [k for k in _REQUIRED_PROFILE_KEYS if not (item or {}).get(k)] if isinstance(item, dict) else []
        if not isinstance(item, dict) or missing:
            note("bundle", f"{PROFILES_FILE}[{pos}]: missing {missing or list(_REQUIRED_PROFILE_KEYS)}; left out")
            continue
        profile_id = str(item["profile_id"])
        if profile_id in profiles:
            note("bundle", f"{PROFILES_FILE}[{pos}]: profile_id {profile_id!r} again; this later profile is kept")
        profile: dict[str, Any] = {
            "profile_id": profile_id,
            "first_name": str(item["first_name"]),
            "last_name": str(item["last_name"]),
            "email": str(item["email"]),
            "occupation": str(item.get("occupation") or item.get("title") or ""),
            "public_info": item.get("public_info") or item.get("bio"),
        }
        # SimLab's rocketchat user name is the NPC's chat handle: the agent may address the NPC by it
        if username := str(next((item[k] for k in _HANDLE_KEYS if item.get(k)), "")).strip().lstrip("@"):
            profile["username"] = username
        profiles[profile_id] = profile
        left_out.update(set(item) - _PROFILE_KEYS)
        left_out.update(k for k, kept in _FALLBACK_PROFILE_KEYS.items() if item.get(k) and item.get(kept))
    for key, count in sorted(left_out.items()):
        why = f"{_FALLBACK_PROFILE_KEYS[key]} is kept" if key in _FALLBACK_PROFILE_KEYS else "no place in a profile"
        note("bundle", f"{PROFILES_FILE}: {key} (in {count} profile(s)): {why}; left out")
    return profiles


@dataclass
class TaskNpcs:
    """What a task's `npcs` entries become."""

    #: the profile ids of the task's NPCs (`Task.npc_profiles`)
    ids: list[str] = field(default_factory=list)
    #: profile_id -> secret (`Task.npc_secrets`)
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the chat seed of the NPCs SimLab's NPC chat plays (`{"npcs": [profile + personality]}`); None: there is none
    chat_seed: dict[str, Any] | None = None
    #: why an NPC cannot be played (the task is then unrunnable)
    problems: list[str] = field(default_factory=list)
    #: where each secret came from (`npcs[2].secret`), for a note when nothing can reveal it
    secret_fields: list[str] = field(default_factory=list)


def task_npcs(
    entries: Any, task_id: str, profiles: dict[str, dict[str, Any]], secrets_given: dict[str, Any], note: Note
) -> TaskNpcs:
    """The task's NPCs. A profile made for an NPC with no profile is added to `profiles` (the scenario's NPC list);
    `secrets_given` are the task's own `npc_secrets`, which win over an entry's `secret`."""
    out = TaskNpcs()
    played: list[dict[str, Any]] = []
    for pos, entry in enumerate(entries if isinstance(entries, list) else []):
        where = f"npcs[{pos}]"
        entry = entry if isinstance(entry, dict) else {"id": entry}
        for key in sorted(set(entry) - _ENTRY_KEYS):
            note(task_id, f"{where}.{key}: has no place in a scenario's NPC; left out")
        personality = _personality(entry, where, task_id, note)
        profile_id = _entry_id(entry, personality is not None)
        if profile_id not in profiles:
            if personality is None or not is_plain_name(profile_id):
                out.problems.append(f"{where}.id {profile_id!r}: no profile of that id in {PROFILES_FILE}")
                continue
            profiles[profile_id] = _made_profile(profile_id, entry, personality)
            note(
                task_id,
                f"{where}: no profile {profile_id!r} in {PROFILES_FILE}; made from its name and role, with the "
                f"address {profiles[profile_id]['email']}",
            )
        profile = profiles[profile_id]
        if profile_id not in out.ids:
            out.ids.append(profile_id)
        if personality is None:
            for key in ("name", "role"):
                if entry.get(key):
                    note(task_id, f"{where}.{key}: SimLab reads it only with traits, context or quirks; left out")
        else:
            _note_other_name(entry, profile, where, task_id, note)
            if personality["role"] == profile["occupation"]:
                personality["role"] = ""  # already the NPC's occupation: the prompt says it once
            played.append({**profile, PERSONALITY_SEED_KEY: personality})
        _add_secret(entry, profile_id, where, out, secrets_given, task_id, note)
    if played:
        out.chat_seed = {"npcs": played}
    return out


def _entry_id(entry: dict[str, Any], chat: bool) -> str:
    """The entry's profile id; an NPC SimLab's chat plays may have only a name, which gives one."""
    profile_id = str(entry.get("id") or "").strip()
    if profile_id or not chat:
        return profile_id
    return _NOT_ID_CHARS.sub("_", str(entry.get("name") or "").lower()).strip("_")


def _text(value: Any, where: str, task_id: str, note: Note) -> str:
    if value is None or isinstance(value, str):
        return (value or "").strip()
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return ", ".join(item.strip() for item in value if item.strip())
    note(task_id, f"{where}: expected text; left out")
    return ""


def _personality(entry: dict[str, Any], where: str, task_id: str, note: Note) -> dict[str, str] | None:
    """The entry's personality when SimLab's NPC chat plays it (any of traits, context, quirks), else None."""
    if not any(entry.get(key) for key in CHAT_PERSONALITY_KEYS):
        return None
    personality = {
        key: _text(entry.get(key), f"{where}.{key}", task_id, note) for key in ("role", *CHAT_PERSONALITY_KEYS)
    }
    if not personality["role"]:
        note(task_id, f"{where}.role: missing (SimLab's NPC chat skips such an NPC); played here without one")
    return NpcPersonality.model_validate(personality).model_dump()


def _made_profile(profile_id: str, entry: dict[str, Any], personality: dict[str, str]) -> dict[str, Any]:
    name = " ".join(str(entry.get("name") or "").split()) or profile_id.replace("_", " ").title()
    first, _, last = name.partition(" ")
    return {
        "profile_id": profile_id,
        "first_name": first,
        "last_name": last,
        "email": f"{profile_id.lower()}@{MADE_UP_EMAIL_DOMAIN}",
        "occupation": personality["role"],
        "public_info": None,
    }


def _note_other_name(entry: dict[str, Any], profile: dict[str, Any], where: str, task_id: str, note: Note) -> None:
    name = " ".join(str(entry.get("name") or "").split())
    known = f"{profile['first_name']} {profile['last_name']}".strip()
    if name and name.lower() != known.lower():
        note(task_id, f"{where}.name {name!r}: the NPC goes by its profile's name {known!r} here (and its id, email)")


def _secret(raw: Any) -> dict[str, Any] | None:
    """SimLab's plain-text secret (no topic reveals it), or the project's `{value, reveal_when}`; None: unusable."""
    if isinstance(raw, str):
        return {"value": raw.strip()} if raw.strip() else None
    if not isinstance(raw, dict) or set(raw) - {"value", "reveal_when"}:
        return None
    value, topics = raw.get("value"), raw.get("reveal_when")
    if not isinstance(value, str) or not value.strip():
        return None
    if topics is None:
        return {"value": value}
    if not isinstance(topics, list) or not topics or not all(isinstance(t, str) and t.strip() for t in topics):
        return None
    return {"value": value, "reveal_when": topics}


def _add_secret(
    entry: dict[str, Any], profile_id: str, where: str, out: TaskNpcs, given: dict[str, Any], task_id: str, note: Note
) -> None:
    if entry.get("secret") in (None, ""):
        return
    secret = _secret(entry["secret"])
    if secret is None:
        note(task_id, f"{where}.secret: expected text or {{value, reveal_when: [topics]}}; left out")
    elif profile_id in given:
        note(task_id, f"{where}.secret: the task's npc_secrets has one for {profile_id!r}, which is kept; left out")
    else:
        out.secrets[profile_id] = secret
        out.secret_fields.append(f"{where}.secret")
