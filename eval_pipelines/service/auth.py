"""API keys of the local evaluation service: the `API-Key` header, checked on every request.

Keys and their permissions come from configuration only, never from code:

- `EVAL_SERVICE_API_KEYS`: `key1:write,key2:read` (a key without `:permission` gets `read`), or
- `EVAL_SERVICE_KEYS_FILE`: a JSON or YAML file, either a mapping `{key: permission}` or
  `{"keys": [{"key": ..., "permission": ...}, ...]}`.

`write` allows everything; `read` allows GET only (POST and DELETE get 403). Keys are compared in constant
time, live only in memory, and never appear in logs, errors or repr.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

KEYS_ENV = "EVAL_SERVICE_API_KEYS"
KEYS_FILE_ENV = "EVAL_SERVICE_KEYS_FILE"
API_KEY_HEADER = "API-Key"
#: Methods that change state (or spend the caller's model budget) need `write`.
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Permission(StrEnum):
    READ = "read"
    WRITE = "write"

    def allows(self, method: str) -> bool:
        return self == Permission.WRITE or method.upper() not in WRITE_METHODS


class KeyConfigError(ValueError):
    """The key configuration is missing or malformed. Messages name the source, never a key."""


def _digest(key: str) -> bytes:
    # Comparing fixed-length digests keeps the comparison time independent of the keys' lengths.
    return hashlib.sha256(key.encode("utf-8")).digest()


class ApiKeyRegistry:
    def __init__(self, keys: Mapping[str, Permission]) -> None:
        if not keys:
            raise KeyConfigError(f"no API keys configured; set {KEYS_ENV} or {KEYS_FILE_ENV}")
        for key in keys:
            if not key or key != key.strip() or any(c in key for c in ":,"):
                raise KeyConfigError("an API key is empty or contains whitespace, ':' or ','")
        self._entries = [(_digest(key), Permission(permission)) for key, permission in keys.items()]

    def __repr__(self) -> str:
        return f"ApiKeyRegistry({len(self._entries)} keys)"

    def __len__(self) -> int:
        return len(self._entries)

    def permission(self, key: str | None) -> Permission | None:
        """The key's permission, or None when it is missing or unknown. Every entry is compared, every time."""
        if not key:
            return None
        candidate = _digest(key)
        found: Permission | None = None
        for digest, permission in self._entries:
            if hmac.compare_digest(digest, candidate):
                found = permission
        return found

    # -- configuration -----------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str, *, source: str = KEYS_ENV) -> ApiKeyRegistry:
        keys: dict[str, Permission] = {}
        for index, item in enumerate(part.strip() for part in text.split(",")):
            if not item:
                continue
            key, _, permission = item.partition(":")
            keys[key.strip()] = cls._permission(permission.strip() or Permission.READ.value, f"{source}[{index}]")
        return cls(keys)

    @classmethod
    def from_file(cls, path: Path) -> ApiKeyRegistry:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise KeyConfigError(f"{path}: cannot read the keys file ({type(exc).__name__})") from None
        try:
            data: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError):
            raise KeyConfigError(f"{path}: not valid JSON/YAML") from None
        if isinstance(data, dict) and isinstance(data.get("keys"), list):
            keys: dict[str, Permission] = {}
            for index, entry in enumerate(data["keys"]):
                if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
                    raise KeyConfigError(f"{path}: keys[{index}]: expected {{key, permission}}")
                keys[entry["key"]] = cls._permission(entry.get("permission", "read"), f"{path}: keys[{index}]")
            return cls(keys)
        if isinstance(data, dict) and all(isinstance(k, str) for k in data):
            return cls({k: cls._permission(v, f"{path}: <key #{i}>") for i, (k, v) in enumerate(data.items())})
        raise KeyConfigError(f"{path}: expected a mapping of key to permission, or {{keys: [...]}}")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ApiKeyRegistry:
        env = os.environ if environ is None else environ
        if env.get(KEYS_FILE_ENV):
            return cls.from_file(Path(env[KEYS_FILE_ENV]))
        if env.get(KEYS_ENV):
            return cls.parse(env[KEYS_ENV])
        raise KeyConfigError(f"no API keys configured; set {KEYS_ENV} (e.g. 'key1:write,key2:read') or {KEYS_FILE_ENV}")

    @staticmethod
    def _permission(value: Any, where: str) -> Permission:
        try:
            return Permission(str(value).strip().lower())
        except ValueError:
            raise KeyConfigError(f"{where}: permission must be 'read' or 'write'") from None
