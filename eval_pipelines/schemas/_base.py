"""Shared pydantic bases: wire models accept unknown fields (hosted variants) but we never emit extras."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict


def utc_now_iso() -> str:
    """ISO 8601 timestamp in UTC with a `Z`-free offset, the form every resource uses."""
    return datetime.now(UTC).isoformat()


class WireModel(BaseModel):
    """A resource read from or written to the wire.

    `extra="ignore"` is deliberate: the hosted product adds fields the specs do not list, and a client
    must be liberal in what it accepts.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class StrictModel(BaseModel):
    """A request body or config file we own: unknown fields are user typos and are rejected."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
