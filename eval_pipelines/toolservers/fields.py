"""What every built-in tool server shares: JSON-schema parameter builders, the deterministic clock and its
timestamp format, and email-address parsing."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from eval_pipelines.toolservers.base import ToolError

#: The workspace account when the seed names none.
DEFAULT_ACCOUNT = "agent@example.com"
#: New items are stamped from the state's latest timestamp (or this epoch) plus one step, so replays of the same
#: actions produce identical ids, timestamps and diffs.
EPOCH = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
CLOCK_STEP = timedelta(minutes=1)

_ADDRESS_RE = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
_ANGLE_RE = re.compile(r"<([^<>]+)>\s*$")


def string_param(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def integer_param(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def format_timestamp(moment: datetime) -> str:
    # Formatted by hand: strftime took twice as long, on every seeded or delivered message of every rollout (and
    # wrote a year below 1000 without its leading zeros, which parse_timestamp could not read back).
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}Z"


def parse_timestamp(value: str) -> datetime:
    """ISO 8601 to an aware datetime; a naive value is read as UTC so stored timestamps sort as strings."""
    moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def is_address(text: str) -> bool:
    return bool(_ADDRESS_RE.match(text))


def parse_addresses(raw: str, field_name: str) -> list[str]:
    """Split a comma/semicolon separated list, accept `Name <addr>`, lowercase; ToolError names a bad one."""
    addresses: list[str] = []
    for part in re.split(r"[,;]", raw):
        candidate = part.strip()
        if not candidate:
            continue
        match = _ANGLE_RE.search(candidate)
        address = (match.group(1) if match else candidate).strip().lower()
        if not _ADDRESS_RE.match(address):
            raise ToolError(f"Invalid email address '{candidate}' in '{field_name}'")
        if address not in addresses:
            addresses.append(address)
    return addresses


def account_of(state: dict[str, dict[str, Any]]) -> str:
    """The workspace's own address (seeded as `account`), or the default one."""
    return str(state.get("settings", {}).get("account", {}).get("email") or DEFAULT_ACCOUNT)
