"""Execute ONE rollout: provision -> seed -> agent -> snapshot and diff -> verify -> artifacts.

Knows nothing about Dagster or the evaluation service: a caller supplies a `RolloutSpec` and an observer
that records phases and steps (the service writes them as status events).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic_core import PydanticSerializationError

from eval_pipelines.agents.base import META_TERMINATION, BaseAgent, construct_agent
from eval_pipelines.agents.loader import load_agent_class
from eval_pipelines.agents.remote import AgentEnvironmentError, AgentRunFailed, RemoteAgent
from eval_pipelines.agents.simlab_adapter import SimLabAgentAdapter
from eval_pipelines.agents.text_tool_calls import flag_text_tool_call
from eval_pipelines.agents.tool_calling import ToolCallingAgent
from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.simulator_checks import off_script_cause, recorded_checks, simulator_checks
from eval_pipelines.engine.simulator_judge import judge_checks
from eval_pipelines.environments.base import BaseEnvironment, ToolServerUnavailable
from eval_pipelines.environments.mcp import McpServerSpec
from eval_pipelines.environments.unified import UnifiedEnvironment
from eval_pipelines.inputs.hosted import simlab_instruction
from eval_pipelines.lib.json_values import without_lone_surrogates
from eval_pipelines.llm.deadline import ROLE_USER, RolloutDeadline, rollout_deadline
from eval_pipelines.llm.errors import LLMError
from eval_pipelines.llm.metering import UsageMeter, metering
from eval_pipelines.schemas.agent_environment import AgentEnvironment
from eval_pipelines.schemas.artifacts import (
    META_CLIENT_CONTEXT,
    META_HTTP_SERVERS,
    META_NPC_TRANSCRIPTS,
    META_SIMLAB_SERVERS,
    META_SIMLAB_TASK,
    META_SIMULATOR_CHECKS,
    META_STATE,
    META_STATE_DIFFS,
    META_TIMEOUT,
    META_TOOL_SERVERS,
    META_TURN_STATES,
    META_UNRESTORABLE_SERVERS,
    META_USAGE,
    META_USER_ENDING,
    META_USER_TURNS,
    RunArtifacts,
)
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import (
    MSG_AGENT_FAILED,
    MSG_CANCELLED,
    MSG_MAX_STEPS,
    MSG_TIMEOUT,
    ErrorClass,
    RolloutPhase,
    RolloutResult,
    RolloutStatus,
    TerminationReason,
    TokenUsage,
)
from eval_pipelines.schemas.scenarios import NpcProfile, ScriptedUserSpec, Task
from eval_pipelines.schemas.sweep import is_simulated_model
from eval_pipelines.schemas.tools import DiffScope, ToolDefinition
from eval_pipelines.schemas.verifiers import VerifierOutcome
from eval_pipelines.sim.task_mark import simulated_request_tag
from eval_pipelines.toolservers.admin import ToolServerAdmin, WorkspaceError
from eval_pipelines.toolservers.chat import ChatServer
from eval_pipelines.toolservers.diff import diff_states
from eval_pipelines.toolservers.npc import (
    npc_configure_settings,
    npc_seed_item,
    npc_transcripts,
    withheld_secrets,
)
from eval_pipelines.users import LlmUser, User, UserSimulatorError, UserTurn, build_user
from eval_pipelines.verifiers.isolation import VerifierLease, VerifierPool
from eval_pipelines.verifiers.loader import VerifierPackage
from eval_pipelines.verifiers.protocol import combine, verify_task
from eval_pipelines.verifiers.simlab_view import simlab_task

#: The tool server whose workspaces host the task's NPCs.
NPC_SERVER = ChatServer.name
#: How long finished rollouts' workspaces wait to be deleted together (see `RolloutEngine.background_cleanup`).
REAP_DELAY_SECONDS = 0.05

#: (spec, clients, stop event) -> agent; on a multi-turn task the engine also passes `user=` (a `User`).
AgentFactory = Callable[..., BaseAgent]

MSG_REFERENCE_AGENT_FAULT = "Internal error of the reference agent (not the model's failure): {error}"
MSG_MAX_STEPS_FAILS = f"{MSG_MAX_STEPS}: a task passes only with a final answer unless it sets pass_at_max_steps"


class RolloutObserver(Protocol):
    def phase(self, phase: RolloutPhase, detail: str | None = None) -> None: ...

    def step(self, steps_taken: int) -> None: ...


class NullObserver:
    def phase(self, phase: RolloutPhase, detail: str | None = None) -> None:
        return None

    def step(self, steps_taken: int) -> None:
        return None


@dataclass(frozen=True)
class RolloutSpec:
    rollout_id: str
    run_id: str
    scenario_id: str
    task: Task
    model_config: ModelConfig
    #: tool server name -> the server's provisioning base URL (a workspace is created under it).
    tool_server_urls: dict[str, str]
    #: tool server name -> parsed seed files.
    seed: dict[str, list[Any]] = field(default_factory=dict)
    #: the task's verifiers, already imported in this process: only for trusted code (tests, tools).
    verifiers: VerifierPackage | None = None
    #: the scenario's verifier package, run in the engine's contained `verifier_pool` (what the service uses).
    verifiers_dir: Path | None = None
    timeout_seconds: float = 300.0
    rollout_index: int = 0
    client_context: dict[str, Any] | None = None
    #: a custom agent as 'module.path:ClassName'; None runs the reference tool-calling agent.
    agent_path: str | None = None
    #: the interpreter `agent_path` runs in, as a worker process of its own (agents/remote.py); None: in-process.
    agent_environment: AgentEnvironment | None = None
    #: MCP servers the agent gets besides the task's tool servers.
    mcp_servers: tuple[McpServerSpec, ...] = ()
    #: the model that plays the task's NPCs (simulated users); None leaves NPCs to the tool server's default.
    user_model_config: ModelConfig | None = None
    #: the scenario's full NPC profiles (with public_info) for the task's NPCs; default: the task's own list.
    npc_profiles: tuple[NpcProfile, ...] = ()
    #: the judge model that reads what the rollout's NPCs and simulated user said against their instructions
    #: (`engine/simulator_judge.py`); None: only the deterministic checks of `engine/simulator_checks.py`
    simulator_judge_config: ModelConfig | None = None
    #: the scenario's guidance (`inputs.hosted.scenario_guidance`), which an imported SimLab task's instruction
    #: carries as SimLab's `tasks run` appends it; None: none
    scenario_guidance: str | None = None

    @property
    def instruction(self) -> str:
        return simlab_instruction(self.task, self.scenario_guidance)


@dataclass
class RolloutOutcome:
    status: RolloutStatus
    termination_reason: TerminationReason
    result: RolloutResult
    artifacts: RunArtifacts

    @property
    def error_class(self) -> ErrorClass | None:
        return self.result.error_class


@dataclass
class _Ending:
    """How the agent part of a rollout ended; `error_class` set when something other than the agent failed."""

    status: RolloutStatus
    reason: TerminationReason
    error_class: ErrorClass | None = None


#: What an agent's constructor may ask for, by parameter name. `user` is the task's user, given only on a
#: multi-turn task: an agent that talks with it hands it the turn with `await user.reply(text)`.
AGENT_INJECTABLES = ("client", "model_config", "user_tag", "stop_event", "user")


def default_agent_factory(
    spec: RolloutSpec, clients: ChatClientPool, stop: asyncio.Event, user: User | None = None
) -> BaseAgent:
    """The reference agent, or the custom agent class named by `spec.agent_path`.

    A custom agent's constructor receives whichever of `client`, `model_config`, `user_tag`, `stop_event` and
    `user` it names (all of them if it takes **kwargs), so agents that bring their own LLM stack need none.
    """
    available: dict[str, Any] = {
        "client": clients.for_model(spec.model_config),
        "model_config": spec.model_config,
        "user_tag": request_tag(spec, spec.model_config),
        "stop_event": stop,
    }
    if user is not None:  # a single-turn task's agents are constructed exactly as before
        available["user"] = user
    if spec.agent_path is None:
        return ToolCallingAgent(
            **available, system_prompt=spec.task.system_prompt, max_steps_per_turn=spec.task.max_steps_per_turn
        )
    if spec.agent_environment is not None:
        return RemoteAgent(
            spec.agent_path,
            spec.agent_environment,
            client=available["client"],
            model_config=spec.model_config,
            user_tag=available["user_tag"],
            server_names=spec.task.simlab_servers,
        )
    agent_class = load_agent_class(spec.agent_path)
    if issubclass(agent_class, SimLabAgentAdapter):
        # A SimLab agent sees the servers under the names the task's bundle gave them.
        available["server_names"] = spec.task.simlab_servers
    agent: BaseAgent = construct_agent(agent_class, available)
    return agent


def request_tag(spec: RolloutSpec, config: ModelConfig) -> str:
    """The `user` field of the rollout's requests to a model: the rollout id; a simulated model is also told the
    task it plays, since benchmark tasks can open with the same message (see sim/task_mark.py)."""
    if is_simulated_model(config.model):
        return simulated_request_tag(spec.rollout_id, spec.scenario_id, spec.task.task_id)
    return spec.rollout_id


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class RolloutEngine:
    def __init__(
        self,
        clients: ChatClientPool,
        admin: ToolServerAdmin,
        agent_factory: AgentFactory = default_agent_factory,
        tool_timeout_seconds: float = 90.0,
        background_cleanup: bool = False,
        verifier_pool: VerifierPool | VerifierLease | None = None,
    ) -> None:
        self.clients = clients
        self.admin = admin
        #: Where verifiers run: contained worker processes. None verifies in this process, which only trusted
        #: verifiers deserve (tests and tools that build an engine by hand); the service always passes a pool.
        self.verifier_pool = verifier_pool
        self.agent_factory = agent_factory
        self.tool_timeout_seconds = tool_timeout_seconds
        #: Delete a finished rollout's workspaces after `execute` returns, so the next rollout starts sooner;
        #: whoever sets it awaits `drain()` before closing `admin`.
        self.background_cleanup = background_cleanup
        self._cleanups: set[asyncio.Task[None]] = set()
        #: finished rollouts' workspaces waiting for the reaper, which deletes those of a server in one request
        self._doomed: list[str] = []
        self._reaper: asyncio.Task[None] | None = None
        #: set by `drain()`: the reaper deletes what waits at once instead of gathering more
        self._reap_now = asyncio.Event()
        #: (tool server base URL, scenario, task or "") -> the listing the first rollout read. Tools do not change
        #: during a run, and every later rollout saves a request and its parsing. Kept by task unless the server
        #: said its listing holds for every workspace (`_listing_key`): a benchmark's server lists the tools of the
        #: classes a task's seed names.
        self._tool_listings: dict[tuple[str, str, str], list[ToolDefinition]] = {}

    async def execute(
        self,
        spec: RolloutSpec,
        observer: RolloutObserver | None = None,
        cancel: asyncio.Event | None = None,
    ) -> RolloutOutcome:
        observer = observer or NullObserver()
        cancel = cancel or asyncio.Event()
        started = time.monotonic()
        artifacts = RunArtifacts(
            task_id=spec.task.task_id,
            task=spec.instruction,
            model=spec.model_config.model,
            provider=spec.model_config.provider.value,
            max_steps=spec.model_config.max_steps,
        )
        if spec.client_context:
            artifacts.metadata[META_CLIENT_CONTEXT] = spec.client_context
        artifacts.set_on_step(observer.step)
        workspaces: dict[str, str] = {}
        initial: dict[str, Any] = {}
        outcomes: list[VerifierOutcome] = []
        environment: UnifiedEnvironment | None = None
        try:
            observer.phase(RolloutPhase.BUILDING_ENVIRONMENT)
            servers = [ts.name for ts in spec.task.tool_servers]
            try:
                # Each workspace is created with its seed in one request (latency is what a rollout waits on);
                # the seeding phase then covers the initial snapshots and the NPCs' configuration.
                seeded: dict[str, dict[str, Any] | None] = {}
                for server in servers:
                    base = self._base_url(spec, server)
                    workspaces[server], seeded[server] = await self.admin.create_seeded_workspace(
                        base, self._seed_for(spec, server)
                    )
                observer.phase(RolloutPhase.SEEDING)
                for server in servers:
                    state = seeded[server]
                    initial[server] = state if state is not None else await self.admin.snapshot(workspaces[server])
                if spec.user_model_config is not None and NPC_SERVER in workspaces:
                    # The NPCs' model (with its key) lives in the tool server's memory for this workspace only.
                    await self.admin.configure(workspaces[NPC_SERVER], npc_configure_settings(spec.user_model_config))
            except (WorkspaceError, KeyError) as exc:
                artifacts.set_error(f"Workspace provisioning failed: {exc}")
                return self._finish(spec, artifacts, _PROVISIONING_FAILED, [], started)

            observer.phase(RolloutPhase.AGENT_RUNNING, "step 0")
            try:
                environment = self._environment(spec, workspaces)
                if environment.mcp_servers:
                    await environment.aconnect()
            except Exception as exc:  # an MCP server that cannot start (or is misdeclared) is a provisioning failure
                artifacts.set_error(f"Workspace provisioning failed: MCP server: {exc}")
                return self._finish(spec, artifacts, _PROVISIONING_FAILED, [], started)
            ending = await self._run_agent(spec, environment, artifacts, cancel, workspaces)
            if spec.agent_path is not None:
                _make_storable(artifacts)
            self._remember_listings(spec, environment, workspaces)
            snapshot_error = await self._capture_state(spec, environment, workspaces, initial, artifacts)
            # Verifiers run before teardown, so one that queries a server live (SimLab's do) finds it here.
            artifacts.metadata[META_TOOL_SERVERS] = dict(workspaces)
            if spec.task.simlab_servers:
                artifacts.metadata[META_SIMLAB_SERVERS] = dict(spec.task.simlab_servers)
            if spec.task.simlab_origin:
                artifacts.metadata[META_SIMLAB_TASK] = simlab_task(spec.task, spec.scenario_id)
            _record_http_servers(artifacts, spec.task.http_servers)
            if snapshot_error is not None and ending.error_class is None:
                # Verifiers read the final state; without it a "fail" would be a wrong number, not a result.
                artifacts.set_error(snapshot_error)
                ending = _Ending(RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR, ErrorClass.TOOL_SERVER)
            await self._check_simulators(spec, artifacts, ending)

            if ending.status == RolloutStatus.COMPLETED:
                observer.phase(RolloutPhase.VERIFYING)
                outcomes = await self.verify(spec, artifacts)
            return self._finish(spec, artifacts, ending, outcomes, started)
        finally:
            if environment is not None:
                await environment.aclose()
            if self.background_cleanup and workspaces:
                self._doomed.extend(workspaces.values())
                self._schedule_reaping()
            else:
                await self._delete_workspaces(list(workspaces.values()))

    def _environment(self, spec: RolloutSpec, workspaces: dict[str, str]) -> UnifiedEnvironment:
        """The agent's servers: the workspaces, the task's own HTTP servers (used as they are: no workspace, seed
        or snapshot of theirs) and its MCP servers besides the rollout's."""
        return UnifiedEnvironment(
            {**workspaces, **spec.task.http_servers},
            timeout_seconds=self.tool_timeout_seconds,
            http_client=self.admin.http_client(),
            mcp_servers=[*spec.mcp_servers, *(McpServerSpec.model_validate(s) for s in spec.task.mcp_servers)],
            known_tools={
                server: tools for server in workspaces if (tools := self._known_listing(spec, server)) is not None
            },
            bare_tool_names=spec.task.bare_tool_names,
            hidden_tools=spec.task.user.hidden_before() if isinstance(spec.task.user, ScriptedUserSpec) else (),
        )

    def _remember_listings(
        self, spec: RolloutSpec, environment: UnifiedEnvironment, workspaces: dict[str, str]
    ) -> None:
        server_wide = environment.server_wide_listings()
        for server, tools in environment.http_tool_listings().items():
            # A task's own HTTP server may change its tools between rollouts; a listing already kept (for every
            # task of the server) needs no copy under this task's key.
            if server in workspaces and self._known_listing(spec, server) is None:
                self._tool_listings[self._listing_key(spec, server, task_wide=server not in server_wide)] = tools

    def _known_listing(self, spec: RolloutSpec, server: str) -> list[ToolDefinition] | None:
        listing = self._tool_listings.get(self._listing_key(spec, server))
        return listing if listing is not None else self._tool_listings.get(self._listing_key(spec, server, False))

    async def _delete_workspaces(self, urls: list[str]) -> None:
        for url in urls:
            # Cleanup is best effort: the result is already decided and a stale workspace only costs memory.
            with contextlib.suppress(WorkspaceError):
                await self.admin.delete_workspace(url)

    def _schedule_reaping(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap())
            self._cleanups.add(self._reaper)
            self._reaper.add_done_callback(self._cleanups.discard)

    async def _reap(self) -> None:
        while self._doomed:
            # Rollouts that finish close together have their workspaces deleted in one request per server: a
            # request per rollout was a visible share of a rollout's CPU, here and in the tool host.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REAP_DELAY_SECONDS):
                    await self._reap_now.wait()
            urls, self._doomed = self._doomed, []
            # Best effort: the results are already decided and a stale workspace only costs memory.
            with contextlib.suppress(WorkspaceError):
                await self.admin.delete_workspaces(urls)

    async def drain(self) -> None:
        """Wait for the workspace deletions still running in the background (see `background_cleanup`)."""
        self._reap_now.set()
        try:
            while self._cleanups or self._doomed:
                if self._doomed:
                    self._schedule_reaping()
                await asyncio.gather(*list(self._cleanups), return_exceptions=True)
        finally:
            self._reap_now.clear()

    @classmethod
    def _listing_key(cls, spec: RolloutSpec, server: str, task_wide: bool = True) -> tuple[str, str, str]:
        """Where a listing is kept: by task, or for every task when the server said its listing holds for every
        workspace of its own (a benchmark's server lists the tools of the classes a task's seed names)."""
        return cls._base_url(spec, server), spec.scenario_id, spec.task.task_id if task_wide else ""

    @staticmethod
    def _base_url(spec: RolloutSpec, server: str) -> str:
        return spec.model_config.tool_server_url or spec.tool_server_urls[server]

    @staticmethod
    def _seed_for(spec: RolloutSpec, server: str) -> list[Any]:
        """The server's seed files; the NPC server also gets the task's NPCs and their secrets, last."""
        seed = list(spec.seed.get(server, []))
        task = spec.task
        if server == NPC_SERVER and (task.npc_profiles or task.npc_secrets):
            profiles = spec.npc_profiles or tuple(task.npc_profiles)
            seed.append(npc_seed_item(profiles, task.npc_secrets))
        return seed

    def _user(self, spec: RolloutSpec, artifacts: RunArtifacts, workspaces: dict[str, str]) -> User | None:
        if spec.task.user is None:
            return None
        config = spec.user_model_config
        client = self.clients.for_model(config) if config is not None else None
        tag = request_tag(spec, config) if config is not None else None
        return _TurnRecorder(build_user(spec.task.user, client, config, tag), self.admin, workspaces, artifacts)

    async def _run_agent(
        self,
        spec: RolloutSpec,
        environment: BaseEnvironment,
        artifacts: RunArtifacts,
        cancel: asyncio.Event,
        workspaces: dict[str, str],
    ) -> _Ending:
        try:
            user = self._user(spec, artifacts, workspaces)
        except UserSimulatorError as exc:
            artifacts.set_error(str(exc))
            return _Ending(RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR, ErrorClass.USER_SIMULATOR)
        try:
            agent = (
                self.agent_factory(spec, self.clients, cancel)
                if user is None
                else self.agent_factory(spec, self.clients, cancel, user=user)
            )
        except (ValueError, TypeError) as exc:  # an unloadable custom agent fails this rollout, with the reason
            artifacts.set_error(MSG_AGENT_FAILED.format(error=exc))
            return _Ending(RolloutStatus.FAILED, TerminationReason.AGENT_ERROR)
        if isinstance(agent, RemoteAgent):
            try:  # its interpreter (a first install takes minutes) is found before the rollout's clock starts
                await agent.prepare()
            except AgentEnvironmentError as exc:
                artifacts.set_error(MSG_AGENT_FAILED.format(error=exc))
                return _AGENT_ENVIRONMENT_FAILED

        async def drive() -> None:
            await _maybe_await(agent.setup(environment))
            if inspect.iscoroutinefunction(agent.run):
                await agent.run(spec.instruction, environment, artifacts)
            else:
                # A synchronous agent runs on a worker thread; its sync environment calls hop back to this loop.
                await asyncio.to_thread(agent.run, spec.instruction, environment, artifacts)

        meter = UsageMeter()
        deadline = RolloutDeadline(spec.timeout_seconds)
        # The task copies the context: every model call the agent makes is metered and bounded by the deadline.
        with metering(meter), rollout_deadline(deadline):
            agent_task = asyncio.ensure_future(drive())
        cancel_wait = asyncio.ensure_future(cancel.wait())
        try:
            done, _ = await asyncio.wait(
                {agent_task, cancel_wait}, timeout=spec.timeout_seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            cancel_wait.cancel()
        # Read before the agent is cancelled: cancelling it ends the requests it was waiting on.
        unanswered = None if agent_task in done else deadline.unanswered()
        unanswered_role = None if agent_task in done else getattr(deadline.unanswered_request(), "role", None)
        if agent_task not in done:
            agent_task.cancel()
            await asyncio.gather(agent_task, return_exceptions=True)
        _record_usage(artifacts, meter)
        if agent_task not in done:
            return _unfinished_ending(artifacts, cancel.is_set(), unanswered, unanswered_role)
        return _finished_ending(artifacts, agent_task, agent)

    async def _capture_state(
        self,
        spec: RolloutSpec,
        environment: UnifiedEnvironment,
        workspaces: dict[str, str],
        initial: dict[str, Any],
        artifacts: RunArtifacts,
    ) -> str | None:
        """Store initial/final state and diffs in the artifacts; return an error text if a snapshot failed."""
        state: dict[str, Any] = {}
        diffs = [d.model_dump(mode="json") for d in environment.state_diffs]
        errors: list[str] = []
        for server, url in workspaces.items():
            try:
                final = await self.admin.snapshot(url)
            except WorkspaceError as exc:
                errors.append(f"final snapshot of tool server {server!r} failed: {exc}")
                continue
            state[server] = {"initial": initial.get(server, {}), "final": final}
            full = diff_states(server, initial.get(server, {}), final, DiffScope.FULL)
            diffs.append(full.model_dump(mode="json"))
        artifacts.metadata[META_STATE] = state
        artifacts.metadata[META_STATE_DIFFS] = diffs
        if NPC_SERVER in state:
            artifacts.metadata[META_NPC_TRANSCRIPTS] = npc_transcripts(state[NPC_SERVER]["final"])
        return "; ".join(errors) or None

    async def _check_simulators(self, spec: RolloutSpec, artifacts: RunArtifacts, ending: _Ending) -> None:
        """Whether the rollout's NPCs and simulated user stayed on script, for a rollout that did not already end in
        an error: the deterministic checks, then the judge's when the spec names a judge model. `_finish` makes a
        stray simulator the rollout's error."""
        if ending.error_class is not None:
            return
        checks = simulator_checks(spec.task, artifacts)
        config = spec.simulator_judge_config
        if checks and config is not None:
            checks += await judge_checks(self.clients.for_model(config), config, spec.task, artifacts)
        if checks:
            artifacts.metadata[META_SIMULATOR_CHECKS] = [c.model_dump() for c in checks]

    async def verify(self, spec: RolloutSpec, artifacts: RunArtifacts) -> list[VerifierOutcome]:
        """Run the task's verifiers over the artifacts (and the state snapshots they carry)."""
        directory = spec.verifiers_dir or (spec.verifiers.directory if spec.verifiers is not None else None)
        if self.verifier_pool is not None and directory is not None:
            return await self.verifier_pool.verify(directory, spec.task.verifiers, artifacts)
        if spec.verifiers is None and directory is not None:
            raise ValueError("a rollout whose verifiers are not imported needs an engine with a verifier_pool")
        return verify_task(spec.verifiers, spec.task.verifiers, artifacts)

    def _finish(
        self,
        spec: RolloutSpec,
        artifacts: RunArtifacts,
        ending: _Ending,
        outcomes: list[VerifierOutcome],
        started: float,
    ) -> RolloutOutcome:
        usage = TokenUsage.model_validate(artifacts.metadata.get(META_USAGE) or {})
        status = ending.status
        # The verdicts are kept either way; they only decide the outcome when the agent finished.
        unfinished = ending.reason == TerminationReason.MAX_STEPS and not spec.task.pass_at_max_steps
        if ending.status == RolloutStatus.COMPLETED and unfinished:
            # An agent that never stops (the same email sent four times until the step budget ran out) has not
            # done the task, even when the final state looks right: its failure, whatever a verifier says.
            status = RolloutStatus.FAILED
            verdicts = combine(outcomes)[3] if outcomes else ""
            message = f"{MSG_MAX_STEPS_FAILS} (verifiers: {verdicts})" if verdicts else MSG_MAX_STEPS_FAILS
            success, reward, partial = False, 0.0, 0.0
        elif ending.status == RolloutStatus.COMPLETED:
            success, reward, partial, message = combine(outcomes)
        else:
            success, reward, partial, message = False, 0.0, 0.0, artifacts.error or ending.status.value
        error_class = ending.error_class
        off_script = off_script_cause(recorded_checks(artifacts)) if error_class is None else None
        if off_script is not None:
            # A simulator that strayed graded itself, whatever the verdicts say: an error, never the agent's result.
            error_class = ErrorClass.SIMULATOR_OFF_SCRIPT
            success, reward, partial = False, 0.0, 0.0
            message = f"{off_script}; {message}" if message else off_script
        if error_class is None and not success:
            # A verifier without a verdict cannot turn an unfinished rollout into an error: it was decided without one.
            error_class, cause = _error_behind_failure(artifacts, [] if unfinished else outcomes)
            if cause is not None:
                message = f"{cause}; {message}" if message else cause
        result = RolloutResult(
            success=success,
            message=message,
            reward=reward,
            partial_credit=partial,
            steps_taken=artifacts.steps_taken,
            duration_seconds=round(time.monotonic() - started, 4),
            estimated_cost_usd=usage.cost_usd,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            verifiers=outcomes,
            termination_reason=ending.reason.value,
            error_class=error_class,
        )
        return RolloutOutcome(status=status, termination_reason=ending.reason, result=result, artifacts=artifacts)


class _TurnRecorder:
    """The task's user as the agent sees it, recording what the engine keeps of each turn: when the agent hands
    the turn back, every workspace's state as the agent left it (`turn_states`, which per-turn verifiers such as
    BFCL's compare); when the conversation ends, how (`user_ending`)."""

    def __init__(self, user: User, admin: ToolServerAdmin, workspaces: dict[str, str], artifacts: RunArtifacts):
        self._user = user
        self._admin = admin
        self._workspaces = workspaces
        self._artifacts = artifacts
        self.agent_greeting = user.agent_greeting

    @property
    def ending(self) -> str | None:
        return self._user.ending

    async def opening(self) -> str | None:
        text = await self._user.opening()
        self._note_said(text)
        self._note_ending()
        return text

    async def reply(self, agent_text: str) -> UserTurn | None:
        await self._snapshot_turn()
        turn = await self._user.reply(agent_text)
        self._note_said(turn.text if turn is not None else None)
        self._note_ending()
        return turn

    def _note_said(self, text: str | None) -> None:
        # What the user model said, for the checks that it stayed on script (`engine/simulator_checks.py`).
        if text is not None and isinstance(self._user, LlmUser):
            self._artifacts.metadata.setdefault(META_USER_TURNS, []).append(text)

    def _note_ending(self) -> None:
        if self._user.ending is not None:
            self._artifacts.metadata[META_USER_ENDING] = self._user.ending

    async def _snapshot_turn(self) -> None:
        names = list(self._workspaces)
        try:
            states = await asyncio.gather(*(self._admin.snapshot(self._workspaces[name]) for name in names))
        except WorkspaceError as exc:
            # Without the turn's state a per-turn verdict would be a wrong number: the server failed, not the agent.
            raise ToolServerUnavailable(f"snapshot at the end of a user turn failed: {exc}") from exc
        self._artifacts.metadata.setdefault(META_TURN_STATES, []).append(dict(zip(names, states, strict=True)))


def _make_storable(artifacts: RunArtifacts) -> None:
    """Replace the lone surrogates a custom agent recorded (a model's text copied as it came): the verifiers, the
    stored file and the warehouse all need a record that encodes. The reference agent replaces them itself."""
    try:
        artifacts.model_dump_json()
    except PydanticSerializationError:
        try:
            clean = RunArtifacts.model_validate(without_lone_surrogates(artifacts.model_dump(mode="json")))
        except (ValueError, RecursionError):
            return  # not a surrogate: storing fails as it would have, with its own message
        for name in RunArtifacts.model_fields:
            setattr(artifacts, name, getattr(clean, name))


def _unfinished_ending(
    artifacts: RunArtifacts, cancelled: bool, unanswered: str | None, unanswered_role: str | None
) -> _Ending:
    """How a rollout ended whose agent was still running when it was cancelled or its time ran out."""
    if cancelled:
        artifacts.set_error(MSG_CANCELLED)
        return _Ending(RolloutStatus.FAILED, TerminationReason.CANCELLED, ErrorClass.CANCELLED)
    if unanswered is not None and unanswered_role == ROLE_USER:
        artifacts.set_error(unanswered)
        return _Ending(RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR, ErrorClass.USER_SIMULATOR)
    if unanswered is not None:
        # The time ran out on the endpoint (a hang, a trickled reply, 429s and back-offs): only the time the agent
        # spent between answered requests is its own timeout.
        artifacts.set_error(MSG_AGENT_FAILED.format(error=unanswered))
        return _Ending(RolloutStatus.FAILED, TerminationReason.AGENT_ERROR, ErrorClass.MODEL_ENDPOINT)
    artifacts.set_error(MSG_TIMEOUT)
    artifacts.metadata[META_TIMEOUT] = True
    return _Ending(RolloutStatus.FAILED, TerminationReason.TIMEOUT)


def _finished_ending(artifacts: RunArtifacts, agent_task: asyncio.Future[None], agent: BaseAgent) -> _Ending:
    """How a rollout ended whose agent returned or raised: what it raised decides whose fault an ending is."""
    try:
        agent_task.result()
    except asyncio.CancelledError:
        artifacts.set_error(MSG_CANCELLED)
        return _Ending(RolloutStatus.FAILED, TerminationReason.CANCELLED, ErrorClass.CANCELLED)
    except ToolServerUnavailable as exc:
        artifacts.set_error(MSG_AGENT_FAILED.format(error=exc))
        return _Ending(RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR, ErrorClass.TOOL_SERVER)
    except UserSimulatorError as exc:
        # The user's model, not the agent's, failed: the conversation cannot go on, and says nothing of the agent.
        artifacts.set_error(str(exc))
        return _Ending(RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR, ErrorClass.USER_SIMULATOR)
    except AgentEnvironmentError as exc:
        # The agent's interpreter could not run it, or the channel to its worker broke: nothing was learned.
        artifacts.set_error(MSG_AGENT_FAILED.format(error=exc))
        return _AGENT_ENVIRONMENT_FAILED
    except LLMError as exc:
        # The endpoint failed (unreachable, refused, rate limited after retries, 5xx, timeout, garbage): nothing
        # was learned about the model's skill.
        artifacts.set_error(MSG_AGENT_FAILED.format(error=exc))
        return _Ending(RolloutStatus.FAILED, TerminationReason.AGENT_ERROR, ErrorClass.MODEL_ENDPOINT)
    except Exception as exc:
        if type(agent) is ToolCallingAgent or (isinstance(agent, RemoteAgent) and not isinstance(exc, AgentRunFailed)):
            # The reference agent is this project's code: what it raises while handling a model's reply (encoding,
            # serialising, recording) is the harness's fault, and must not count against the model; so is what the
            # code driving a remote agent raises. A custom agent's own crash (a subclass included, a remote agent's
            # `AgentRunFailed`) stays the agent's failure.
            artifacts.set_error(MSG_REFERENCE_AGENT_FAULT.format(error=f"{type(exc).__name__}: {exc}"))
            return _Ending(RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR, ErrorClass.INTERNAL)
        artifacts.set_error(MSG_AGENT_FAILED.format(error=exc))
        return _Ending(RolloutStatus.FAILED, TerminationReason.AGENT_ERROR)
    flag_text_tool_call(artifacts)
    if artifacts.metadata.get(META_TERMINATION) == TerminationReason.MAX_STEPS.value:
        return _Ending(RolloutStatus.COMPLETED, TerminationReason.MAX_STEPS)
    return _Ending(RolloutStatus.COMPLETED, TerminationReason.FINAL_RESPONSE)


def _record_usage(artifacts: RunArtifacts, meter: UsageMeter) -> None:
    """The metered usage of the rollout's model calls; an agent with an LLM stack of its own (nothing metered)
    keeps what it reported itself."""
    if meter.usage.llm_calls:
        artifacts.metadata[META_USAGE] = meter.usage.model_dump()


_AGENT_ENVIRONMENT_FAILED = _Ending(
    RolloutStatus.FAILED, TerminationReason.INFRASTRUCTURE_ERROR, ErrorClass.AGENT_ENVIRONMENT
)
_PROVISIONING_FAILED = _Ending(RolloutStatus.WORKSPACE_ERROR, TerminationReason.WORKSPACE_ERROR, ErrorClass.TOOL_SERVER)


def _error_behind_failure(
    artifacts: RunArtifacts, outcomes: list[VerifierOutcome]
) -> tuple[ErrorClass | None, str | None]:
    """A rollout that did not pass, looked at for a cause other than the agent: a verifier without a verdict, or
    an NPC whose model failed or withheld what it had to reveal. (class, sentence naming the cause), or
    (None, None) when the failure is the agent's own."""
    broken = [o for o in outcomes if o.is_error]
    if broken:
        return ErrorClass.VERIFIER, f"verifier {broken[0].module!r} gave no verdict"
    npc_failures = [r for r in artifacts.tool_results if r.error_source == ErrorClass.NPC_MODEL.value]
    if npc_failures:
        return ErrorClass.NPC_MODEL, f"the NPC model failed {len(npc_failures)} time(s) during the rollout"
    # A benchmark's upstream worker that crashed or hung during a call: infrastructure, never the agent's.
    server_failures = [r for r in artifacts.tool_results if r.error_source == ErrorClass.TOOL_SERVER.value]
    if server_failures:
        return ErrorClass.TOOL_SERVER, f"the tool server failed {len(server_failures)} time(s) during the rollout"
    state = artifacts.metadata.get(META_STATE) or {}
    if NPC_SERVER in state:
        withheld = withheld_secrets(state[NPC_SERVER])
        if withheld:
            return ErrorClass.NPC_MODEL, withheld[0]
    return None, None


def _record_http_servers(artifacts: RunArtifacts, servers: dict[str, str]) -> None:
    """The task's own HTTP servers, for verifiers that query them live. A URL with credentials in it is left out
    (artifacts are stored): a verifier asking for that server learns why instead."""
    plain = {name: url for name, url in servers.items() if not _carries_credentials(url)}
    if plain:
        artifacts.metadata[META_HTTP_SERVERS] = plain
    if len(plain) < len(servers):
        artifacts.metadata[META_UNRESTORABLE_SERVERS] = {
            name: "its URL carries credentials, which a rollout's artifacts never hold"
            for name in servers.keys() - plain.keys()
        }


def _carries_credentials(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return bool(parts.username or parts.password or parts.query)
