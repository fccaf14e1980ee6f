"""The local runtime behind the embedded default: built-in tool servers and the simulated models, each served
over real HTTP on loopback, started once per process and shared by every run."""

from __future__ import annotations

import atexit
import threading

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.llm.sim_judge import SIM_JUDGE, sim_judge_persona
from eval_pipelines.llm.sim_npc import SIM_NPC, sim_npc_persona
from eval_pipelines.llm.sim_taskgen import SIM_TASKGEN, taskgen_persona
from eval_pipelines.llm.simulated import ReferenceBook, SimPersona, create_sim_app
from eval_pipelines.platform.simulated import PLATFORM_PERSONAS
from eval_pipelines.scenarios.catalog import ScenarioCatalog
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.sweep import SIMULATED_BASE_URL
from eval_pipelines.toolservers.host import BUILTIN_SERVERS, ToolServerProcess


def simulated_personas() -> dict[str, SimPersona]:
    """Every simulated persona the local runtime serves next to the simulated agents, so `base_url: sim://local`
    reaches an NPC (`sim-npc`), a rubric judge (`sim-judge`), a task generator (`sim-taskgen`) or the platform's
    judges and generator."""
    return {SIM_NPC: sim_npc_persona, SIM_JUDGE: sim_judge_persona, SIM_TASKGEN: taskgen_persona, **PLATFORM_PERSONAS}


_tool_host: ToolServerProcess | None = None
_tool_host_lock = threading.Lock()


def shared_tool_host() -> ToolServerProcess:
    """The built-in tool servers, in one child process per process, shared by every runtime (they hold no
    catalog state: each rollout brings its own workspace and seed); stopped at interpreter exit. If that
    process died, the next caller gets a new one (a long-lived service keeps working; the rollouts that were
    using it end as infrastructure or workspace errors)."""
    global _tool_host
    with _tool_host_lock:
        if _tool_host is not None and not _tool_host.is_alive():
            _tool_host.stop()
            _tool_host = None
        if _tool_host is None:
            host = ToolServerProcess(list(BUILTIN_SERVERS)).start()
            atexit.register(host.stop)
            _tool_host = host
        return _tool_host


class LocalRuntime:
    def __init__(self, catalog: ScenarioCatalog) -> None:
        self.catalog = catalog
        self._sim: BackgroundServer | None = None
        self._lock = threading.Lock()

    def start(self) -> LocalRuntime:
        shared_tool_host()
        with self._lock:
            if self._sim is None:
                app = create_sim_app(ReferenceBook.from_catalog(self.catalog), personas=simulated_personas())
                self._sim = BackgroundServer(app).start()
        return self

    def stop(self) -> None:
        """Stop this runtime's simulated models (the tool servers are shared, and stop at interpreter exit)."""
        with self._lock:
            if self._sim is not None:
                self._sim.stop()
                self._sim = None

    def tool_server_urls(self) -> dict[str, str]:
        host = shared_tool_host()
        return {name: host.base_url(name) for name in BUILTIN_SERVERS}

    @property
    def tool_host_pid(self) -> int | None:
        """The process serving the built-in tool servers (benchmarks add its CPU to the rollouts')."""
        return shared_tool_host().pid

    @property
    def simulated_base_url(self) -> str:
        sim = self.start()._sim
        assert sim is not None
        return f"{sim.url}/v1"

    def resolve(self, config: ModelConfig) -> ModelConfig:
        """Point `sim://local` at the running simulated-model server; other configs pass through unchanged."""
        if config.base_url == SIMULATED_BASE_URL:
            return config.model_copy(update={"base_url": self.simulated_base_url})
        return config


_shared: dict[str, LocalRuntime] = {}
_shared_lock = threading.Lock()


def shared_runtime(catalog: ScenarioCatalog) -> LocalRuntime:
    """One runtime per scenario directory per process; stopped at interpreter exit."""
    key = str(catalog.root.resolve())
    with _shared_lock:
        if key not in _shared:
            runtime = LocalRuntime(catalog)
            _shared[key] = runtime
            atexit.register(runtime.stop)
        return _shared[key]
