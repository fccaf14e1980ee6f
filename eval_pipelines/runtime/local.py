"""The local runtime behind the embedded default: built-in tool servers and the simulated models, each served
over real HTTP on loopback, started once per process and shared by every run."""

from __future__ import annotations

import atexit
import logging
import threading

from eval_pipelines.benchmarks.catalog import server_classes
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.sweep import SIMULATED_BASE_URL
from eval_pipelines.sim.endpoint import ReferenceBook, SimPersona, create_sim_app
from eval_pipelines.sim.judge import SIM_JUDGE, sim_judge_persona
from eval_pipelines.sim.npc import SIM_NPC, sim_npc_persona
from eval_pipelines.sim.platform import PLATFORM_PERSONAS
from eval_pipelines.sim.taskgen import SIM_TASKGEN, taskgen_persona
from eval_pipelines.toolservers.host import BUILTIN_SERVERS, ToolServerProcess


def simulated_personas() -> dict[str, SimPersona]:
    """Every simulated persona the local runtime serves next to the simulated agents, so `base_url: sim://local`
    reaches an NPC (`sim-npc`), a rubric judge (`sim-judge`), a task generator (`sim-taskgen`) or the platform's
    judges and generator."""
    return {SIM_NPC: sim_npc_persona, SIM_JUDGE: sim_judge_persona, SIM_TASKGEN: taskgen_persona, **PLATFORM_PERSONAS}


#: Builds the stand-in of a scenario's simulated server (`servers/<name>.json`) in the tool host. Named by path, as
#: the host names the benchmarks' servers: the stand-in is task generation's, a layer above this one, and only
#: the child host imports it.
SIMULATED_SERVER_FACTORY = "eval_pipelines.taskgen.schema_server:served_from_definition"

#: Probe period and consecutive misses before the tool-server host is replaced: a frozen host goes within about
#: 16 s (with the probe's own 5 s timeout). Two misses of 1.5 s replaced a host that was only busy, its /health
#: queued behind the tool calls of a thousand rollouts in flight, and with it every one of their workspaces.
HEALTH_INTERVAL_SECONDS = 0.5
HEALTH_MISSES = 3
logger = logging.getLogger(__name__)

_tool_host: ToolServerProcess | None = None
_tool_host_lock = threading.Lock()


def shared_tool_host() -> ToolServerProcess:
    """The built-in tool servers, in one child process per process, shared by every runtime (they hold no
    catalog state: each rollout brings its own workspace and seed); stopped at interpreter exit. A monitor
    replaces the child, on the same socket and so the same URLs, when it dies or stops answering; the rollouts
    that were using it end as tool_server errors (and are retried), the others go on. The benchmarks' upstream
    servers are served beside them; each starts its upstream worker on its first workspace, so a sweep without
    benchmarks pays nothing for them."""
    global _tool_host
    with _tool_host_lock:
        if _tool_host is not None and not _tool_host.is_alive():
            _tool_host.restart()
        if _tool_host is None:
            extra = server_classes()
            host = ToolServerProcess(
                [*BUILTIN_SERVERS, *extra], extra=extra, simulated_factory=SIMULATED_SERVER_FACTORY
            ).start()
            monitor = ToolHostMonitor(host)
            monitor.start()
            atexit.register(host.stop)
            atexit.register(monitor.stop)
            _tool_host = host
        return _tool_host


class ToolHostMonitor(threading.Thread):
    """Probes the host's /health every `interval` seconds; after `misses` probes in a row fail (dead, frozen, or
    too slow to answer), replaces it. A frozen host would otherwise hold every rollout that calls it until that
    call's own timeout, and every later rollout after it."""

    def __init__(
        self, host: ToolServerProcess, interval: float = HEALTH_INTERVAL_SECONDS, misses: int = HEALTH_MISSES
    ) -> None:
        super().__init__(name="tool-host-monitor", daemon=True)
        self.host = host
        self.interval = interval
        self.misses = misses
        self.replacements = 0
        self._stopped = threading.Event()

    def run(self) -> None:
        missed = 0
        while not self._stopped.wait(self.interval):
            missed = 0 if self.host.healthy() else missed + 1
            if missed < self.misses or self._stopped.is_set():
                continue
            with _tool_host_lock:
                logger.warning(
                    "the tool-server host (pid %s) missed %d health checks; replacing it", self.host.pid, missed
                )
                try:
                    self.host.restart()
                    self.replacements += 1
                except (RuntimeError, TimeoutError, OSError):
                    logger.exception("the tool-server host could not be replaced; trying again")
            missed = 0

    def stop(self) -> None:
        self._stopped.set()


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
        """The host's servers by name, and the simulated servers of the catalog's scenarios by their host names
        (`ScenarioFiles.tool_server_urls` gives a scenario's under its own names)."""
        host = shared_tool_host()
        urls = {name: host.base_url(name) for name in host.names}
        for scenario in self.catalog.all():
            try:
                servers = scenario.simulated_servers
            except ScenarioError as exc:  # that scenario's tasks fail to load with this reason; the others run
                logger.warning("%s", exc)
                continue
            for server in servers.values():
                urls.setdefault(server.host_name, host.simulated_url(server))
        return urls

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
