"""Built-in stateful tool servers (spec 001 `/tools` + `/step`) with per-workspace state, snapshots and diffs."""

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
