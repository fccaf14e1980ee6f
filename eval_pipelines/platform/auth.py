"""Bearer tokens of the local platform: issued by configuration, each granting one or more spaces.

Sources (combined):
- `PLATFORM_TOKENS`: `token:space_uuid,token2:space_uuid2` (a token listed twice grants both spaces);
- `PLATFORM_TOKENS_FILE`: one grant per line, `token:space_uuid` or `sha256:<hex digest of the token>:space_uuid`,
  `#` starts a comment. `issue_token` appends digest lines, so that file never holds a usable token.

Only SHA-256 digests are kept in memory; tokens are never stored, logged or echoed. A missing or unknown token
is 401; a known token used for a space it was not granted is 403.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException, Request

TOKENS_ENV = "PLATFORM_TOKENS"
TOKENS_FILE_ENV = "PLATFORM_TOKENS_FILE"
DIGEST_PREFIX = "sha256:"
ISSUED_TOKEN_PREFIX = "plt_"
_HEX_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_BEARER = re.compile(r"^\s*bearer\s+(\S+)\s*$", re.IGNORECASE)


class TokenConfigError(ValueError):
    """The token configuration is invalid. Messages name the source and entry, never the token."""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def canonical_space_id(value: str) -> str:
    return str(uuid.UUID(value.strip()))


def _parse_entry(entry: str, where: str) -> tuple[str, str]:
    """(digest, space) of one `token:space` or `sha256:<hex>:space` entry."""
    if entry.startswith(DIGEST_PREFIX):
        digest, sep, space = entry[len(DIGEST_PREFIX) :].rpartition(":")
        digest = digest.lower()
        if not sep or not _HEX_DIGEST.match(digest):
            raise TokenConfigError(f"{where}: expected sha256:<64 hex digits>:<space uuid>")
    else:
        token, sep, space = entry.rpartition(":")
        if not sep or not token or any(ch.isspace() for ch in token):
            raise TokenConfigError(f"{where}: expected <token>:<space uuid> (the token may not contain spaces)")
        digest = token_digest(token)
    try:
        return digest, canonical_space_id(space)
    except ValueError:
        raise TokenConfigError(f"{where}: the space id is not a UUID") from None


class TokenRegistry:
    """token digest -> granted space ids."""

    def __init__(self, grants: Mapping[str, Iterable[str]] | None = None) -> None:
        self._grants: dict[str, frozenset[str]] = {d: frozenset(s) for d, s in (grants or {}).items()}

    @classmethod
    def parse(cls, text: str, *, source: str) -> TokenRegistry:
        grants: dict[str, set[str]] = {}
        entries = [line.split("#", 1)[0] for line in text.splitlines()]
        index = 0
        for line in entries:
            for raw in line.split(","):
                entry = raw.strip()
                if not entry:
                    continue
                index += 1
                digest, space = _parse_entry(entry, f"{source} entry {index}")
                grants.setdefault(digest, set()).add(space)
        return cls(grants)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TokenRegistry:
        env = os.environ if environ is None else environ
        registry = cls()
        inline = env.get(TOKENS_ENV)
        if inline:
            registry = registry.merged(cls.parse(inline, source=TOKENS_ENV))
        path = env.get(TOKENS_FILE_ENV)
        if path:
            registry = registry.merged(cls.from_file(Path(path)))
        return registry

    @classmethod
    def from_file(cls, path: Path) -> TokenRegistry:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TokenConfigError(f"{path}: cannot read the tokens file ({exc.strerror})") from None
        return cls.parse(text, source=str(path))

    def merged(self, other: TokenRegistry) -> TokenRegistry:
        grants: dict[str, set[str]] = {d: set(s) for d, s in self._grants.items()}
        for digest, spaces in other._grants.items():
            grants.setdefault(digest, set()).update(spaces)
        return TokenRegistry(grants)

    def with_token(self, token: str, space_id: str) -> TokenRegistry:
        return self.merged(TokenRegistry({token_digest(token): {canonical_space_id(space_id)}}))

    def spaces_for(self, token: str) -> frozenset[str] | None:
        return self._grants.get(token_digest(token))

    def __len__(self) -> int:
        return len(self._grants)

    def __repr__(self) -> str:
        return f"TokenRegistry({len(self._grants)} token(s))"


@dataclass(frozen=True)
class Principal:
    """The caller: the spaces its token grants."""

    spaces: frozenset[str]

    def require_space(self, space_id: uuid.UUID | str) -> str:
        space = canonical_space_id(str(space_id))
        if space not in self.spaces:
            raise HTTPException(status_code=403, detail=f"this token is not authorised for space {space}")
        return space


def authenticator(registry: TokenRegistry) -> Callable[[Request], Principal]:
    """A FastAPI dependency: the request's Principal, or 401."""

    def authenticate(request: Request) -> Principal:
        header = request.headers.get("authorization")
        challenge = {"WWW-Authenticate": "Bearer"}
        if not header:
            raise HTTPException(status_code=401, detail="missing bearer token", headers=challenge)
        match = _BEARER.match(header)
        if match is None:
            raise HTTPException(
                status_code=401, detail="the Authorization header must be 'Bearer <token>'", headers=challenge
            )
        spaces = registry.spaces_for(match.group(1))
        if spaces is None:
            raise HTTPException(status_code=401, detail="invalid bearer token", headers=challenge)
        return Principal(spaces)

    return authenticate


@dataclass(frozen=True)
class IssuedToken:
    token: str
    space_id: str

    def __repr__(self) -> str:
        return f"IssuedToken(token='**********', space_id={self.space_id!r})"


def issue_token(tokens_file: Path, space_id: str | None = None) -> IssuedToken:
    """Make a new token for `space_id` (a new space when None) and append its digest to `tokens_file`.

    The token is returned once, for the caller to hand to the user; the file keeps only its digest.
    """
    space = canonical_space_id(space_id) if space_id else str(uuid.uuid4())
    token = ISSUED_TOKEN_PREFIX + secrets.token_urlsafe(32)
    tokens_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(tokens_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(f"{DIGEST_PREFIX}{token_digest(token)}:{space}\n")
    return IssuedToken(token=token, space_id=space)
