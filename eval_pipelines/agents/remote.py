"""A SimLab agent run in an interpreter of its own (a sweep model's `agent_environment`).

SimLab's agents and its cookbook adapters import mcp 1.x and litellm, which this project's interpreter cannot
hold beside its own pins. `RemoteAgent` starts `remote_worker.py` (standard library only) in the agent's
interpreter, one worker per rollout, and serves it over pipes: JSON lines on the worker's stdin and stdout, a
channel private to the two processes (no port another local process could reach, nothing to authenticate). Every
tool listing and call the agent makes is executed here, through the engine's environment and `SimLabEnvironment`
(servers under the task bundle's names, `input_schema` beside `parameters`, the whole `/step` JSON as the
observation), so the engine records tool calls, state and diffs as for any agent; the agent's messages and tool
calls are recorded as it records them, its final answer and metadata when it finishes.

The agent's model settings are SimLab's runner's (provider, model, key, base URL, max steps: constructor
arguments for the built-in `ReferenceAgent`, the SIMLAB_AGENT_* and OPENAI_* variables for any other agent), but
the key and base URL are those of the rollout's `ModelProxy`: the real ones never reach the worker, whose
environment is scrubbed (HOME in a private temp folder). The worker runs confined (writes only there, address
space, CPU and file-size limits) in a process group killed as one when the rollout ends, times out or is
cancelled.

Whose fault an ending is: an agent that cannot start (a venv that does not install, a missing interpreter, an
ImportError, a constructor that raises) or a channel that breaks (the worker dies without finishing, or writes
garbage) is an `AgentEnvironmentError`, an error of class `agent_environment`. An exception raised by the agent's
own `setup` or `run` is the agent's failure, as SimLab's runner records it (`Agent execution failed: ...`),
unless the rollout's model endpoint or a tool server failed first: then the rollout is an error of that class.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from eval_pipelines.agents.base import BaseAgent
from eval_pipelines.agents.model_proxy import ModelProxy
from eval_pipelines.agents.simlab_adapter import SimLabContext, SimLabEnvironment
from eval_pipelines.environments.base import BaseEnvironment, ToolServerUnavailable
from eval_pipelines.inputs.paths import cache_dir, project_dir
from eval_pipelines.lib.child import ChildLimits, ContainedChild
from eval_pipelines.lib.venvs import VenvInstallError, cached_venv, install_digest
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.llm.deadline import current_deadline
from eval_pipelines.llm.metering import current_meter
from eval_pipelines.schemas.agent_environment import (
    AGENT_VENV_PREFIX,
    AGENT_WORKER_CPU_SECONDS,
    AGENT_WORKER_FILE_BYTES,
    AGENT_WORKER_MAX_TASKS,
    AGENT_WORKER_MEMORY_BYTES,
    AGENT_WORKER_START_TIMEOUT_SECONDS,
    AGENT_WORKER_STDERR_BYTES,
    MAX_AGENT_WORKER_LINE_BYTES,
    AgentEnvironment,
)
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig

WORKER_SCRIPT = Path(__file__).with_name("remote_worker.py")
#: The cgroup family of agent workers (apart from the verifier and upstream workers').
AGENT_CGROUP_FAMILY = "agent-workers"
#: The provider the agent is told: the proxy speaks OpenAI's wire whatever the real endpoint is.
PROXY_PROVIDER = "openai"
#: What the worker's environment may hold besides the allow-listed basics: settings, never a secret of ours.
LITELLM_SETTINGS = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}


class AgentEnvironmentError(RuntimeError):
    """The agent could not run in its environment, or the channel to its worker broke: infrastructure."""


class AgentRunFailed(RuntimeError):
    """The agent's own `setup` or `run` raised: its failure. The message is what SimLab's runner would record."""


def _notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def resolve_interpreter(spec: AgentEnvironment, *, notice: Callable[[str], None] = _notice) -> Path:
    """The interpreter `spec` names, its venv made first when it names requirements (once per machine and list).
    AgentEnvironmentError, quoting pip or naming the path, when there is none."""
    if spec.requirements is not None:
        installs = [(*spec.pip_flags, *spec.requirements)]
        venv = cache_dir() / "venvs" / f"{AGENT_VENV_PREFIX}{install_digest(installs)}"
        try:
            return cached_venv(venv, installs, label=f"the agent environment {spec.requirements}", notice=notice)
        except VenvInstallError as exc:
            raise AgentEnvironmentError(str(exc)) from None
    python = Path(spec.python) if spec.python is not None else Path(str(spec.venv)) / "bin" / "python"
    if not python.is_file() or not os.access(python, os.X_OK):
        raise AgentEnvironmentError(f"agent_environment: {python} is not an executable Python interpreter")
    return python


def agent_paths(spec: AgentEnvironment) -> list[str]:
    """The folders on the agent's sys.path: `spec.paths` (relative ones of the project directory), or the project
    directory itself."""
    root = project_dir()
    return [str((root / path).resolve()) for path in spec.paths] if spec.paths is not None else [str(root)]


AGENT_WORKER_LIMITS = ChildLimits(
    memory_bytes=AGENT_WORKER_MEMORY_BYTES,
    cpu_seconds=AGENT_WORKER_CPU_SECONDS,
    file_bytes=AGENT_WORKER_FILE_BYTES,
    max_tasks=AGENT_WORKER_MAX_TASKS,
    stderr_bytes=AGENT_WORKER_STDERR_BYTES,
    line_bytes=MAX_AGENT_WORKER_LINE_BYTES,
)


class AgentWorker:
    """The worker process of one rollout: started confined in a process group, killed as one by `close`."""

    def __init__(self, python: Path, env: dict[str, str]) -> None:
        self.python = python
        self._extra_env = env
        self._child: ContainedChild | None = None
        self._write_lock = asyncio.Lock()

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        return None if self._child is None else self._child.process

    @property
    def pid(self) -> int | None:
        return None if self._child is None else self._child.pid

    async def start(self) -> None:
        try:
            self._child = await ContainedChild.start(
                [str(self.python), "-I", str(WORKER_SCRIPT)],
                limits=AGENT_WORKER_LIMITS,
                family=AGENT_CGROUP_FAMILY,
                workdir_prefix="agent-worker-",
                env=self._extra_env,
                cwd=project_dir(),
            )
        except OSError as exc:
            raise AgentEnvironmentError(f"the agent's worker could not start with {self.python}: {exc}") from None

    def stderr_tail(self) -> str:
        return "" if self._child is None else self._child.stderr_tail()

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process is not None and self.process.stdin is not None
        line = json.dumps(message, default=str).encode() + b"\n"
        async with self._write_lock:
            self.process.stdin.write(line)
            await self.process.stdin.drain()

    async def receive(self, timeout: float | None = None) -> dict[str, Any]:
        """The worker's next message; AgentEnvironmentError when it exited, went quiet past `timeout` or wrote
        something that is not a JSON object."""
        assert self.process is not None and self.process.stdout is not None
        try:
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        except TimeoutError:
            raise AgentEnvironmentError(f"the agent's worker did not start within {timeout:g}s") from None
        except (ValueError, asyncio.LimitOverrunError):
            raise AgentEnvironmentError("the agent's worker wrote a line over the size limit") from None
        if not line:
            assert self._child is not None
            await self._child.wait_briefly()
            raise AgentEnvironmentError(
                f"the agent's worker exited (status {self.process.returncode}) before it finished{self.stderr_tail()}"
            )
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise AgentEnvironmentError("the agent's worker wrote a line that is not a JSON object")
        return message

    async def close(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            await child.close()


class RemoteAgent(BaseAgent):
    """The engine's view of a SimLab agent running in its own interpreter (one worker per rollout)."""

    def __init__(
        self,
        agent_path: str,
        environment_spec: AgentEnvironment,
        *,
        client: ChatClient,
        model_config: ModelConfig,
        user_tag: str,
        server_names: dict[str, str] | None = None,
    ) -> None:
        self.agent_path = agent_path
        self.environment_spec = environment_spec
        self.client = client
        self.model_config = model_config
        self.user_tag = user_tag
        self.server_names = dict(server_names or {})
        self.python: Path | None = None
        #: The agent's own name once its worker started; the proxy of the rollout while it runs (for tests).
        self.agent_name: str | None = None
        self.proxy: ModelProxy | None = None
        self.worker: AgentWorker | None = None
        self._infrastructure_failure: Exception | None = None

    def name(self) -> str:  # type: ignore[override]
        return self.agent_name or self.agent_path

    async def prepare(self) -> None:
        """Find (or install, once per machine) the agent's interpreter: before the rollout's clock starts, since
        a first install takes minutes no agent should be charged for. AgentEnvironmentError when there is none."""
        self.python = await asyncio.to_thread(resolve_interpreter, self.environment_spec)

    def setup(self, environment: BaseEnvironment) -> None:
        """Nothing here: the worker calls the agent's `setup` right before its `run`, as SimLab's runner does."""

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        if self.python is None:
            await self.prepare()
        assert self.python is not None
        simlab_environment = SimLabEnvironment(environment, asyncio.get_running_loop(), self.server_names)
        proxy = ModelProxy(
            self.client, self.model_config, self.user_tag, meter=current_meter(), deadline=current_deadline()
        )
        async with proxy:
            self.proxy = proxy
            worker = AgentWorker(self.python, self._worker_env(proxy))
            self.worker = worker
            try:
                await worker.start()
                await self._start_agent(worker, instruction, simlab_environment, context, proxy)
                await self._converse(worker, simlab_environment, SimLabContext(context, simlab_environment), proxy)
            finally:
                await worker.close()

    def _worker_env(self, proxy: ModelProxy) -> dict[str, str]:
        """SimLab's runner's variables, pointing at the proxy, and the environment's own settings."""
        return {
            **self.environment_spec.env,
            **LITELLM_SETTINGS,
            "SIMLAB_AGENT_MODEL": self.model_config.model,
            "SIMLAB_AGENT_PROVIDER": PROXY_PROVIDER,
            "SIMLAB_AGENT_BASE_URL": proxy.base_url,
            "SIMLAB_AGENT_API_KEY": proxy.token,
            "OPENAI_API_KEY": proxy.token,
            "OPENAI_BASE_URL": proxy.base_url,
        }

    async def _start_agent(
        self,
        worker: AgentWorker,
        instruction: str,
        environment: SimLabEnvironment,
        context: RunArtifacts,
        proxy: ModelProxy,
    ) -> None:
        await worker.send(
            {
                "op": "start",
                "agent": self.agent_path,
                "paths": agent_paths(self.environment_spec),
                "instruction": instruction,
                "task_id": context.task_id,
                "model": self.model_config.model,
                "provider": PROXY_PROVIDER,
                "max_steps": self.model_config.max_steps,
                "api_key": proxy.token,
                "base_url": proxy.base_url,
                "namespaces": [
                    {"name": n.name, "transport": n.transport, "endpoint": n.endpoint}
                    for n in environment.list_tool_namespaces()
                ],
            }
        )
        first = await worker.receive(timeout=AGENT_WORKER_START_TIMEOUT_SECONDS)
        if first.get("op") == "failed":
            raise AgentEnvironmentError(
                f"the agent {self.agent_path} could not start in {self.python}: {first.get('error')}"
            )
        if first.get("op") != "started":
            raise AgentEnvironmentError(f"the agent's worker opened with {first.get('op')!r}, not 'started'")
        self.agent_name = str(first.get("agent_name") or self.agent_path)

    async def _converse(
        self, worker: AgentWorker, environment: SimLabEnvironment, context: SimLabContext, proxy: ModelProxy
    ) -> None:
        calls: set[asyncio.Task[None]] = set()
        try:
            while True:
                message = await worker.receive()
                op = message.get("op")
                if op in ("list_tools", "call_tool"):
                    task = asyncio.create_task(self._answer(worker, environment, message))
                    calls.add(task)
                    task.add_done_callback(calls.discard)
                elif op == "record_message":
                    context.record_message(str(message.get("role", "")), message.get("content"))
                elif op == "record_tool_call":
                    context.record_tool_call(
                        SimpleNamespace(**(message.get("call") or {})), SimpleNamespace(**(message.get("result") or {}))
                    )
                elif op == "finished":
                    self._finish(message, context, proxy)
                    return
                else:
                    raise AgentEnvironmentError(f"the agent's worker sent an unknown message {op!r}")
        finally:
            for task in calls:
                task.cancel()
            await asyncio.gather(*calls, return_exceptions=True)

    async def _answer(self, worker: AgentWorker, environment: SimLabEnvironment, message: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"op": "reply", "id": message.get("id")}
        try:
            if message["op"] == "list_tools":
                reply["result"] = await environment.alist_tools(message.get("tool_server"))
            else:
                result = await environment.acall_tool(
                    str(message.get("tool_server")),
                    str(message.get("tool_name")),
                    dict(message.get("parameters") or {}),
                )
                reply["result"] = {"observation": result.observation, "is_error": result.is_error}
            reply["ok"] = True
        except ToolServerUnavailable as exc:
            self._infrastructure_failure = self._infrastructure_failure or exc
            reply.update(ok=False, error=str(exc))
        except Exception as exc:  # an unknown server, bad parameters: the agent hears it as SimLab would tell it
            reply.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(ConnectionError):
            await worker.send(reply)

    def _finish(self, message: dict[str, Any], context: SimLabContext, proxy: ModelProxy) -> None:
        metadata = message.get("metadata")
        if isinstance(metadata, dict):
            context.metadata.update(metadata)
        if message.get("final_observation") is not None:
            context.final_observation = str(message["final_observation"])
        if message.get("error") is not None:
            context.error = str(message["error"])
        crashed = message.get("crashed")
        if crashed is None:
            return
        # The agent raised. If our side failed it first (the endpoint, a tool server), that failure is the cause.
        if self._infrastructure_failure is not None:
            raise self._infrastructure_failure
        if proxy.endpoint_errors:
            raise proxy.endpoint_errors[-1]
        raise AgentRunFailed(str(crashed))
