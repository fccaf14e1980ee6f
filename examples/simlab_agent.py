"""Agents written the way SimLab's are: no base class of this project, SimLab's own dataclasses for calls and
results, sync `run`, tools listed with `asyncio.run(env.alist_tools())` as SimLab's cookbook adapters do.

`SimLabStyleMailer` asks Aisha about the projector, which is what `simlab-bundle/`'s task wants; it calls no
model. Run it in a sweep with `PYTHONPATH=examples` (README: "Bring a SimLab agent")."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

AISHA = "aisha.okafor@example.com"


@dataclass
class ToolCall:  # SimLab's shape
    tool_server: str
    tool_name: str
    parameters: dict[str, Any] = field(default_factory=dict)


class SimLabStyleMailer:
    @staticmethod
    def name() -> str:
        return "simlab-style-mailer"

    def version(self) -> str | None:
        return "0.1"

    def setup(self, environment: Any) -> None:
        self.tools: list[dict[str, Any]] = []

    def run(self, instruction: str, environment: Any, context: Any) -> None:
        self.tools = asyncio.run(environment.alist_tools())
        send = next(tool for tool in self.tools if tool["name"] == "send_email")
        required = send["input_schema"]["required"]
        parameters = {"to": AISHA, "subject": "Projector in Room 4B", "body": f"Asked by {self.name()}"}
        assert set(required) <= set(parameters), required
        context.record_message("user", instruction)
        result = environment.call_tool(send["tool_server"], "send_email", parameters)
        # SimLab hands the whole /step JSON back as the observation
        text = result.observation["observation"]["text"]
        context.record_tool_call(ToolCall(send["tool_server"], "send_email", parameters), result)
        # the tool message in the shape SimLab's artifact helpers write, which SimLab verifiers read
        payload = {"tool_call_id": "call_1", "tool_server": send["tool_server"], "tool_name": "send_email"}
        context.record_message("tool", {**payload, "is_error": result.is_error, "summary": text})
        context.record_message("assistant", f"Sent: {text}")
        context.final_observation = "sent"


class AsyncSimLabStyleAgent:
    @staticmethod
    def name() -> str:
        return "async-simlab-style"

    async def setup(self, environment: Any) -> None:
        self.count = len(await environment.alist_tools())

    async def run(self, instruction: str, environment: Any, context: Any) -> None:
        context.final_observation = f"{self.count} tools"
