"""The built-in tool servers by name (its own module so `diff` can look up nouns without importing `host`)."""

from __future__ import annotations

from eval_pipelines.toolservers.base import BuiltinToolServer
from eval_pipelines.toolservers.email import EmailServer

BUILTIN_SERVERS: dict[str, type[BuiltinToolServer]] = {
    EmailServer.name: EmailServer,
}
