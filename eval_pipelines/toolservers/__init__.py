"""Built-in stateful tool servers (spec 001 `/tools` + `/step`) with per-workspace state, snapshots and diffs.

The names below load on first use (PEP 562): a submodule such as `registry` or `files` is imported without the
HTTP app (FastAPI), which only serving needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipelines.lib.lazy_names import lazy_names

if TYPE_CHECKING:
    from eval_pipelines.toolservers.admin import ToolServerAdmin, WorkspaceError
    from eval_pipelines.toolservers.app import DEFAULT_WORKSPACE, create_app
    from eval_pipelines.toolservers.base import BuiltinToolServer, SeedError, State, ToolContext, ToolError
    from eval_pipelines.toolservers.calendar import CalendarServer
    from eval_pipelines.toolservers.chat import ChatServer
    from eval_pipelines.toolservers.diff import diff_states
    from eval_pipelines.toolservers.email import EmailServer
    from eval_pipelines.toolservers.files import FilesServer
    from eval_pipelines.toolservers.host import ToolServerHost, build_host_app
    from eval_pipelines.toolservers.records import RecordsServer
    from eval_pipelines.toolservers.registry import BUILTIN_SERVERS

_HOMES = {
    "BUILTIN_SERVERS": "registry",
    "BuiltinToolServer": "base",
    "CalendarServer": "calendar",
    "ChatServer": "chat",
    "DEFAULT_WORKSPACE": "app",
    "EmailServer": "email",
    "FilesServer": "files",
    "RecordsServer": "records",
    "SeedError": "base",
    "State": "base",
    "ToolContext": "base",
    "ToolError": "base",
    "ToolServerAdmin": "admin",
    "ToolServerHost": "host",
    "WorkspaceError": "admin",
    "build_host_app": "host",
    "create_app": "app",
    "diff_states": "diff",
}

__all__ = [
    "BUILTIN_SERVERS",
    "DEFAULT_WORKSPACE",
    "BuiltinToolServer",
    "CalendarServer",
    "ChatServer",
    "EmailServer",
    "FilesServer",
    "RecordsServer",
    "SeedError",
    "State",
    "ToolContext",
    "ToolError",
    "ToolServerAdmin",
    "ToolServerHost",
    "WorkspaceError",
    "build_host_app",
    "create_app",
    "diff_states",
]


__getattr__ = lazy_names(__name__, globals(), _HOMES)
