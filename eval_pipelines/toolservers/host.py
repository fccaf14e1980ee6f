"""Serve several built-in tool servers from one loopback port, each mounted under `/<name>`: on a thread of
this process (`ToolServerHost`) or in a child process of their own (`ToolServerProcess`). A host may also serve
simulated servers (`SimulatedServers`): stand-ins built from a scenario's tool schemas, mounted on first use."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from eval_pipelines.inputs.paths import cache_settings
from eval_pipelines.lib.aio import startup_objects_frozen
from eval_pipelines.lib.confine import make_undumpable, scrubbed_environment
from eval_pipelines.lib.http_pool import default_ssl_context
from eval_pipelines.lib.open_files import raise_open_files_limit
from eval_pipelines.lib.redact import install_log_redaction
from eval_pipelines.lib.serving import KEEP_ALIVE_SECONDS, BackgroundServer, announcing_keep_alive
from eval_pipelines.schemas.scenarios import SIMULATED_HOST_PREFIX, SimulatedServer
from eval_pipelines.toolservers.app import DEFAULT_MAX_WORKSPACES, create_app
from eval_pipelines.toolservers.base import BuiltinToolServer
from eval_pipelines.toolservers.files import COMMAND_WRAPPER_ENV, command_sandbox
from eval_pipelines.toolservers.registry import BUILTIN_SERVERS

__all__ = ["BUILTIN_SERVERS", "SimulatedServers", "ToolServerHost", "ToolServerProcess", "build_host_app"]

#: Resolves a name the host does not serve yet to a server to mount under it, or None.
ServerResolver = Callable[[str], BuiltinToolServer | None]


class SimulatedServerError(RuntimeError):
    """A registered definition no stand-in can be built from (the factory refused it); the message says why."""


@dataclass(frozen=True)
class SimulatedServers:
    """The simulated servers of a host: each definition is written to `directory` as `<host name>.json` by the
    process that hands out its URL, and built on the host's first request for it by `factory` (`module:function`
    taking the definition as a dict). Files rather than a call to the host: a replaced host (see
    `ToolServerProcess.restart`) finds them again, and the same definition is the same name (a content digest),
    so the file is never rewritten."""

    directory: Path
    factory: str
    #: the names registered by this process (the files stay until the host stops, across restarts).
    registered: set[str] = field(default_factory=set, compare=False)

    def register(self, server: SimulatedServer) -> str:
        """The name the host serves `server` under, once its definition is on disk."""
        name = server.host_name
        if name in self.registered:
            return name
        path = self.directory / f"{name}.json"
        if not path.exists():
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            staged = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            staged.write_text(server.model_dump_json(), encoding="utf-8")
            staged.replace(path)
        self.registered.add(name)
        return name

    def resolve(self, name: str) -> BuiltinToolServer | None:
        """The server registered under `name`, built by the factory; None when nothing is."""
        if not name.startswith(SIMULATED_HOST_PREFIX) or not name[len(SIMULATED_HOST_PREFIX) :].isalnum():
            return None
        path = self.directory / f"{name}.json"
        try:
            definition = SimulatedServer.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if definition.host_name != name:
            return None
        module_name, _, function_name = self.factory.partition(":")
        factory = getattr(importlib.import_module(module_name), function_name)
        try:
            server = factory(definition.model_dump(mode="json"))
        except ValueError as exc:  # the task generator's refusals (SchemaServerError) name the tool and field
            raise SimulatedServerError(f"simulated server {definition.name!r} cannot be served: {exc}") from None
        if not isinstance(server, BuiltinToolServer):
            raise TypeError(f"{self.factory} did not return a tool server")
        return server


class HostApp:
    """ASGI: `/<name>/...` goes to that server's app (`app.create_app`), `/health` lists them; anything else is a 404.

    A plain dispatcher rather than a FastAPI app mounting the others: a root app's middleware and routing ran
    on every request before the server's own (about an eighth of a tool call's CPU in the tool host).
    """

    def __init__(
        self,
        apps: dict[str, ASGIApp],
        status: dict[str, str] | None = None,
        servers: Iterable[BuiltinToolServer] = (),
        resolve: ServerResolver | None = None,
        max_workspaces: int = DEFAULT_MAX_WORKSPACES,
    ) -> None:
        self.apps = apps
        #: closed at shutdown: a server may run a backend process (a benchmark's upstream worker).
        self.servers = list(servers)
        self._resolve = resolve
        self._max_workspaces = max_workspaces
        self._health = json.dumps({"status": "healthy", "servers": sorted(apps), **(status or {})}).encode()

    def _mounted(self, name: str) -> ASGIApp | None:
        app = self.apps.get(name)
        if app is None and self._resolve is not None and name:
            server = self._resolve(name)
            if server is not None:
                app = self.apps[name] = create_app(server, max_workspaces=self._max_workspaces)
                self.servers.append(server)
        return app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send, self.servers)
            return
        path: str = scope["path"]
        name, _, _ = path[1:].partition("/")
        try:
            app = self._mounted(name)
        except SimulatedServerError as exc:  # the scenario's definition is at fault: its rollouts say why
            if scope["type"] == "http":
                await self._send_json(send, 500, json.dumps({"detail": str(exc)}).encode())
            return
        if app is not None:
            # As Starlette's Mount: the path stays whole, the mount point moves into root_path.
            root_path = scope.get("root_path", "")
            mounted = {"root_path": f"{root_path}/{name}", "app_root_path": scope.get("app_root_path", root_path)}
            child = {**scope, **mounted}
            await app(child, receive, send)
        elif scope["type"] == "http":
            status, body = (200, self._health) if path == "/health" else (404, b'{"detail":"Not Found"}')
            await self._send_json(send, status, body)

    @staticmethod
    async def _send_json(send: Send, status: int, body: bytes) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    async def _lifespan(receive: Receive, send: Send, servers: list[BuiltinToolServer]) -> None:
        # The servers keep their state in their app objects: nothing starts with the process; what they run
        # beside it stops with it.
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for server in servers:
                    await server.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def build_host_app(
    servers: dict[str, BuiltinToolServer],
    max_workspaces: int = DEFAULT_MAX_WORKSPACES,
    simulated: SimulatedServers | None = None,
) -> HostApp:
    """An app serving each server under `/<name>`, plus `/health` listing what it serves (and, with the files
    server, how its `run_command` is isolated on this host: `command_sandbox`), and the simulated servers
    registered in `simulated` under their host names."""
    status = {"command_sandbox": command_sandbox().mode} if "files" in servers else {}
    apps: dict[str, ASGIApp] = {
        name: create_app(server, max_workspaces=max_workspaces) for name, server in servers.items()
    }
    resolve = simulated.resolve if simulated is not None else None
    return HostApp(apps, status, servers.values(), resolve=resolve, max_workspaces=max_workspaces)


def _simulated_servers(factory: str | None) -> SimulatedServers | None:
    if factory is None:
        return None
    return SimulatedServers(Path(tempfile.mkdtemp(prefix="eval-simulated-servers-")), factory)


#: Server classes a host serves beyond the built-in ones (the benchmarks' upstream servers), by name.
ExtraServers = Mapping[str, type[BuiltinToolServer]]


def _checked_names(servers: Iterable[str], extra: ExtraServers | None = None) -> list[str]:
    names = list(dict.fromkeys(servers))
    known = {**BUILTIN_SERVERS, **(extra or {})}
    unknown = [n for n in names if n not in known]
    if unknown:
        kind = "tool server(s)" if extra else "built-in tool server(s)"
        raise ValueError(f"unknown {kind} {unknown}; available: {sorted(known)}")
    if not names:
        raise ValueError("a tool server host needs at least one tool server")
    return names


def _class_path(cls: type[BuiltinToolServer]) -> str:
    """`module:QualName`, how a child host finds a server class that is not built in."""
    if "<locals>" in cls.__qualname__:
        raise ValueError(f"tool server class {cls.__qualname__} is not importable by a child process")
    return f"{cls.__module__}:{cls.__qualname__}"


def _load_class(path: str) -> type[BuiltinToolServer]:
    module_name, _, qualname = path.partition(":")
    found: object = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, BuiltinToolServer)):
        raise ValueError(f"{path} is not a tool server class")
    return found


class ToolServerHost:
    """`with ToolServerHost(["email"]) as host: host.base_url("email")` -> `http://127.0.0.1:PORT/email`.

    One uvicorn thread serves every requested server, so many concurrent rollouts share a single port
    and keep-alive connections instead of one server per rollout.
    """

    def __init__(
        self,
        servers: Iterable[str] = ("email",),
        host: str = "127.0.0.1",
        port: int | None = None,
        max_workspaces: int = DEFAULT_MAX_WORKSPACES,
        extra: ExtraServers | None = None,
        simulated_factory: str | None = None,
    ) -> None:
        names = _checked_names(servers, extra)
        known = {**BUILTIN_SERVERS, **(extra or {})}
        self.servers: dict[str, BuiltinToolServer] = {name: known[name]() for name in names}
        self.simulated = _simulated_servers(simulated_factory)
        self.app = build_host_app(self.servers, max_workspaces=max_workspaces, simulated=self.simulated)
        self._server = BackgroundServer(self.app, host=host, port=port)
        self._started = False

    def simulated_url(self, server: SimulatedServer) -> str:
        """Where the stand-in for `server` answers (built on its first request)."""
        if self.simulated is None:
            raise RuntimeError("this host serves no simulated servers (no simulated_factory)")
        return f"{self._server.url}/{self.simulated.register(server)}"

    @property
    def url(self) -> str:
        return self._server.url

    def base_url(self, name: str) -> str:
        if name not in self.servers:
            raise KeyError(f"tool server {name!r} is not hosted here; hosted: {sorted(self.servers)}")
        if not self._started:
            raise RuntimeError("ToolServerHost is not started; call start() first")
        return f"{self._server.url}/{name}"

    def start(self) -> ToolServerHost:
        self._server.start()
        self._started = True
        return self

    def stop(self) -> None:
        self._server.stop()
        self._started = False
        if self.simulated is not None:
            shutil.rmtree(self.simulated.directory, ignore_errors=True)
            self.simulated.registered.clear()

    def __enter__(self) -> ToolServerHost:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


#: How long a health probe of the host may take before it counts as a miss: a busy host answers /health after
#: the requests queued before it, seconds' worth with a thousand rollouts in flight on a loaded machine.
HEALTH_TIMEOUT_SECONDS = 5.0
#: The host's queue of connections not yet accepted (uvicorn's default, 2,048, would also hold a thousand).
LISTEN_BACKLOG = 4096
_KILL_WAIT_SECONDS = 10.0
#: How often a child host checks that the process that started it is still alive.
PARENT_WATCH_SECONDS = 1.0


class ToolServerProcess:
    """The same host in a child process: `with ToolServerProcess(["email"]) as host: host.base_url("email")`.

    Tool servers then use a core of their own instead of sharing this process's interpreter lock with the
    rollouts that call them (at 50 concurrent rollouts that contention, not the model, was the bottleneck).
    The port is bound here and handed to the child as a file descriptor, so there is no race for it and
    requests made before the child is ready simply wait. The child exits when this process does, even
    when this one is killed.
    """

    def __init__(
        self,
        servers: Iterable[str] = ("email",),
        host: str = "127.0.0.1",
        max_workspaces: int = DEFAULT_MAX_WORKSPACES,
        startup_timeout: float = 60.0,
        extra: ExtraServers | None = None,
        simulated_factory: str | None = None,
    ) -> None:
        self.names = _checked_names(servers, extra)
        self.simulated = _simulated_servers(simulated_factory)
        #: name -> `module:Class` of the served servers that are not built in; the child imports them.
        self.extra_paths = {name: _class_path(cls) for name, cls in (extra or {}).items() if name in self.names}
        self.host = host
        self.max_workspaces = max_workspaces
        self.startup_timeout = startup_timeout
        self._socket: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0
        # One client for every probe: `httpx.get` builds a client, and with it a TLS context, per call, which at
        # a probe every half second was a measurable share of a sweep's CPU. No kept connections: a probe after
        # a restart must not fail on a connection the old child held.
        self._probe = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), verify=default_ssl_context())

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def is_alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def base_url(self, name: str) -> str:
        if name not in self.names:
            raise KeyError(f"tool server {name!r} is not hosted here; hosted: {sorted(self.names)}")
        if self._process is None:
            raise RuntimeError("ToolServerProcess is not started; call start() first")
        return f"{self.url}/{name}"

    def simulated_url(self, server: SimulatedServer) -> str:
        """Where the stand-in for `server` answers (built on the child's first request for it, again after a
        restart)."""
        if self.simulated is None:
            raise RuntimeError("this host serves no simulated servers (no simulated_factory)")
        if self._process is None:
            raise RuntimeError("ToolServerProcess is not started; call start() first")
        return f"{self.url}/{self.simulated.register(server)}"

    def start(self) -> ToolServerProcess:
        if self._process is not None:
            return self
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, 0))
        # Every rollout in flight may connect at once (a thousand when their model calls answer together):
        # a queue shorter than that drops connections, which then wait out a TCP retransmit of a second or more.
        # The kernel caps it at net.core.somaxconn.
        listener.listen(LISTEN_BACKLOG)
        self._socket = listener
        self.port = int(listener.getsockname()[1])
        self._spawn()
        return self

    def restart(self) -> None:
        """Replace the child with a new one on the same socket, so every URL stays valid. The old child is killed
        (SIGKILL also ends a stopped process): its connections reset, so callers waiting on it fail at once
        instead of at their timeout. Its workspaces are lost; the rollouts that held them end in errors."""
        old, self._process = self._process, None
        if old is not None and old.poll() is None:
            old.kill()
            old.wait(_KILL_WAIT_SECONDS)
        self._spawn()

    def healthy(self, timeout: float = HEALTH_TIMEOUT_SECONDS) -> bool:
        """The child is alive and answers /health in time."""
        if not self.is_alive():
            return False
        try:
            return self._probe.get(f"{self.url}/health", timeout=timeout).status_code == 200
        except httpx.HTTPError:
            return False

    def _spawn(self) -> None:
        assert self._socket is not None
        listener = self._socket
        command = [sys.executable, "-m", "eval_pipelines.toolservers", "--fd", str(listener.fileno()),
                   "--servers", ",".join(self.names), "--max-workspaces", str(self.max_workspaces),
                   "--parent-pid", str(os.getpid()),
                   *(f"--extra={name}={path}" for name, path in self.extra_paths.items())]  # fmt: skip
        if self.simulated is not None:
            command += ["--simulated-dir", str(self.simulated.directory), "--simulated-factory", self.simulated.factory]
        # The host runs model-chosen commands (run_command): it starts with none of this process's secrets.
        env = scrubbed_environment({"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **cache_settings()})
        if COMMAND_WRAPPER_ENV in os.environ:  # a setting, not a secret: the host prefixes it to every command
            env[COMMAND_WRAPPER_ENV] = os.environ[COMMAND_WRAPPER_ENV]
        self._process = subprocess.Popen(command, pass_fds=(listener.fileno(),), stdout=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._process.poll() is not None:
                code = self._process.returncode
                self.stop()
                raise RuntimeError(f"the tool server process exited during startup (status {code})")
            try:
                if self._probe.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the tool server process did not answer within {self.startup_timeout:g}s")
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self.simulated is not None:
            shutil.rmtree(self.simulated.directory, ignore_errors=True)
            self.simulated.registered.clear()

    def __enter__(self) -> ToolServerProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _serve(
    fd: int,
    names: list[str],
    max_workspaces: int,
    parent_pid: int,
    extra: ExtraServers,
    simulated: SimulatedServers | None = None,
) -> None:
    """The child's body: serve on the inherited socket until SIGTERM or until the parent is gone."""
    make_undumpable()  # it holds NPC model keys in memory (configure) that a command must not read
    install_log_redaction()  # before uvicorn's Config, which sets up its loggers
    # Every rollout in flight, of every run and worker process, holds a connection here: as many as allowed.
    raise_open_files_limit(None)
    known = {**BUILTIN_SERVERS, **extra}
    servers = {name: known[name]() for name in names}
    app = build_host_app(servers, max_workspaces=max_workspaces, simulated=simulated)
    # Not uvicorn's `fd=`: it wraps the descriptor as a Unix socket, so accepted TCP connections miss
    # TCP_NODELAY and every response waits out the client's delayed ACK (~40 ms a request).
    listener = socket.socket(fileno=fd)
    server = uvicorn.Server(
        uvicorn.Config(
            announcing_keep_alive(app),
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            backlog=LISTEN_BACKLOG,  # uvicorn listens on the inherited socket again, with its own backlog
        )
    )

    def watch_parent() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_WATCH_SECONDS)
        server.should_exit = True

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    with startup_objects_frozen():  # the servers and their apps stay out of the collector's full scans
        server.run(sockets=[listener])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="serve built-in tool servers on an inherited socket")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--servers", required=True, help="comma-separated built-in server names")
    parser.add_argument("--max-workspaces", type=int, default=DEFAULT_MAX_WORKSPACES)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--extra", action="append", default=[], help="NAME=module:Class of a server not built in")
    parser.add_argument("--simulated-dir", help="where the simulated servers' definitions are written")
    parser.add_argument("--simulated-factory", help="module:function building a simulated server")
    args = parser.parse_args(argv)
    extra = {name: _load_class(path) for name, _, path in (item.partition("=") for item in args.extra)}
    simulated = (
        SimulatedServers(Path(args.simulated_dir), args.simulated_factory)
        if args.simulated_dir and args.simulated_factory
        else None
    )
    names = _checked_names(args.servers.split(","), extra)
    _serve(args.fd, names, args.max_workspaces, args.parent_pid, extra, simulated)
    return 0
