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
from eval_pipelines.toolservers.host import BUILTIN_SERVERS, ToolServerHost


def simulated_personas() -> dict[str, SimPersona]:
    """Every simulated persona the local runtime serves next to the simulated agents, so `base_url: sim://local`
    reaches an NPC (`sim-npc`), a rubric judge (`sim-judge`), a task generator (`sim-taskgen`) or the platform's
    judges and generator."""
    return {SIM_NPC: sim_npc_persona, SIM_JUDGE: sim_judge_persona, SIM_TASKGEN: taskgen_persona, **PLATFORM_PERSONAS}


class LocalRuntime:
    def __init__(self, catalog: ScenarioCatalog) -> None:
        self.catalog = catalog
        self._tool_host: ToolServerHost | None = None
        self._sim: BackgroundServer | None = None
        self._lock = threading.Lock()

    def start(self) -> LocalRuntime:
        with self._lock:
            if self._tool_host is None:
                self._tool_host = ToolServerHost(list(BUILTIN_SERVERS))
                self._tool_host.start()
            if self._sim is None:
                app = create_sim_app(ReferenceBook.from_catalog(self.catalog), personas=simulated_personas())
                self._sim = BackgroundServer(app).start()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._tool_host is not None:
                self._tool_host.stop()
                self._tool_host = None
            if self._sim is not None:
                self._sim.stop()
                self._sim = None

    def tool_server_urls(self) -> dict[str, str]:
        host = self.start()._tool_host
        assert host is not None
        return {name: host.base_url(name) for name in BUILTIN_SERVERS}

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
