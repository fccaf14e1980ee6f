"""The MCP SDK is an extra (`pip install 'eval_pipelines[mcp]'`): without it, the package imports and runs every
task that names no MCP server, and a task that names one, or the MCP bridge, says which extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

from eval_pipelines.environments.base import ToolServerUnavailable
from eval_pipelines.environments.mcp import McpServerConnection, McpServerSpec, mcp_sdk_installed

#: Run in a child: the SDK made unimportable before anything of the package is imported.
WITHOUT_SDK = "import sys; sys.modules['mcp'] = None; sys.modules['mcp_types'] = None; "


def test_the_sdk_is_installed_here() -> None:
    assert mcp_sdk_installed()


async def test_a_server_without_the_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    assert not mcp_sdk_installed()
    connection = McpServerConnection(McpServerSpec(name="search", url="http://127.0.0.1:9/mcp"), timeout_seconds=5)
    with pytest.raises(ToolServerUnavailable, match=r"MCP server 'search'.*pip install 'eval_pipelines\[mcp\]'"):
        await connection.open()


def test_the_package_and_the_cli_import_without_the_sdk() -> None:
    code = WITHOUT_SDK + "import eval_pipelines.engine.rollout, eval_pipelines.environments, eval_pipelines.cli"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_bridge_without_the_sdk_names_the_extra() -> None:
    code = WITHOUT_SDK + "import eval_pipelines.toolservers.mcp_bridge"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "the MCP bridge needs the MCP SDK" in done.stderr and "pip install 'eval_pipelines[mcp]'" in done.stderr
