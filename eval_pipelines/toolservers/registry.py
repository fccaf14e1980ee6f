"""The built-in tool servers by name (its own module so `diff` can look up nouns without importing `host`)."""

from __future__ import annotations

from eval_pipelines.toolservers.base import BuiltinToolServer
from eval_pipelines.toolservers.calendar import CalendarServer
from eval_pipelines.toolservers.chat import ChatServer
from eval_pipelines.toolservers.email import EmailServer
from eval_pipelines.toolservers.files import FilesServer
from eval_pipelines.toolservers.records import RecordsServer

BUILTIN_SERVERS: dict[str, type[BuiltinToolServer]] = {
    EmailServer.name: EmailServer,
    CalendarServer.name: CalendarServer,
    ChatServer.name: ChatServer,
    RecordsServer.name: RecordsServer,
    FilesServer.name: FilesServer,
}
