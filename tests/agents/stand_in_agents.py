"""SimLab-style agents that need only the standard library: written to a folder that goes on the worker's
`paths`, and run by another interpreter (this project's own Python, started with `-I`: none of this package is
importable there, and SimLab is not installed, so the worker's stand-in classes are used)."""

from __future__ import annotations

AGENTS_MODULE = "stand_in_agents_mod"

SOURCE = '''
import asyncio
import json
import os
import subprocess
import time
import urllib.request
from dataclasses import dataclass


@dataclass
class Call:
    tool_server: str
    tool_name: str
    parameters: dict


class ChatLoopAgent:
    """Lists its tools with asyncio.run, asks the model through SIMLAB_AGENT_BASE_URL, calls what it says."""

    @staticmethod
    def name():
        return "chat-loop"

    def setup(self, environment):
        self.tools = asyncio.run(environment.alist_tools())

    def run(self, instruction, environment, context):
        base, key = os.environ["SIMLAB_AGENT_BASE_URL"], os.environ["SIMLAB_AGENT_API_KEY"]
        tools = [
            {"type": "function", "function": {"name": t["tool_server"] + "__" + t["name"],
             "description": t.get("description", ""), "parameters": t["input_schema"]}}
            for t in self.tools
        ]
        messages = [{"role": "user", "content": instruction}]
        context.record_message("user", instruction)
        replies = []
        for _ in range(context.max_steps):
            body = json.dumps({"model": os.environ["SIMLAB_AGENT_MODEL"], "messages": messages, "tools": tools})
            request = urllib.request.Request(
                base + "/chat/completions", data=body.encode(),
                headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read().decode()
            replies.append(text)
            message = json.loads(text)["choices"][0]["message"]
            messages.append(message)
            context.record_message("assistant", message.get("content") or "")
            if not message.get("tool_calls"):
                context.final_observation = message.get("content") or ""
                break
            for call in message["tool_calls"]:
                server, _, tool = call["function"]["name"].partition("__")
                parameters = json.loads(call["function"]["arguments"] or "{}")
                result = environment.call_tool(server, tool, parameters)
                context.record_tool_call(Call(server, tool, parameters), result)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result.observation)})
        context.metadata["environ"] = dict(os.environ)
        context.metadata["proxy_replies"] = replies


class AsyncLister:
    @staticmethod
    def name():
        return "async-lister"

    async def setup(self, environment):
        pass

    async def run(self, instruction, environment, context):
        tools = await environment.alist_tools()
        context.final_observation = ",".join(sorted(t["name"] for t in tools))


class Crasher:
    @staticmethod
    def name():
        return "crasher"

    def setup(self, environment):
        pass

    def run(self, instruction, environment, context):
        context.record_message("assistant", "about to fail")
        raise RuntimeError("boom in the agent")


class Sleeper:
    """Starts a child that would outlive it, says its pid, then never ends."""

    @staticmethod
    def name():
        return "sleeper"

    def setup(self, environment):
        pass

    def run(self, instruction, environment, context):
        child = subprocess.Popen(["sleep", "600"])
        context.record_message("assistant", "child " + str(child.pid))
        time.sleep(600)


class Refuser:
    def __init__(self):
        raise ValueError("no settings for me")

    @staticmethod
    def name():
        return "refuser"

    def setup(self, environment):
        pass

    def run(self, instruction, environment, context):
        pass
'''
