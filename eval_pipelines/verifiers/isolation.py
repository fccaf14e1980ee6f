"""Run verifiers over many rollouts, in a worker process (untrusted code: bundles) or in this one (trusted).

`IsolatedVerifierRunner` keeps one worker process (a fresh interpreter) per verifier package and sends it whole
batches of rollouts, so a batch costs one message per verifier call rather than a process per call. The
worker reports each verifier's outcome as it finishes; the parent waits at most `timeout_seconds` for each.
A verifier that hangs, kills its interpreter (`os._exit`, a segfault) or calls `sys.exit` therefore costs one
failed outcome with a clear message; the worker is replaced and the batch goes on from the next verifier.

The per-verifier clock also covers reading the rollout's trace (for its first verifier) and importing the
module (on its first use), both small next to a timeout. A module that brings the worker down
`max_worker_failures` times in one `run` is not run again in that run: its remaining calls fail at once, so one
broken verifier cannot turn a 10,000-rollout batch into 10,000 process restarts.

The worker is a containment boundary, not a full sandbox. It gets none of this process's environment variables
beyond locale and paths and the non-secret `SIMLAB_VERIFIER_*` settings SimLab exports to its verifiers (never the
key, never a base URL that carries credentials), so API keys stay behind; its address space is capped
(`VERIFIER_MEMORY_LIMIT_BYTES`), so a memory blow-up is a MemoryError in one verdict, not the machine. Once the
package is imported it works in a private temp dir, confines its writes to that dir with Landlock and drops every
capability (`lib/confine.py`): a verifier can change no file outside the dir, and, even as root, cannot read the
environment or memory of the processes that hold keys (they mark themselves non-dumpable). It may still read files
and use the network. On a kernel without Landlock the write confinement is missing; the other limits hold.

The worker and every process it starts are one group (`lib/proc_group.py`): a cgroup of its own where this process
may make one, capped at `VERIFIER_MAX_TASKS`, so a fork bomb meets a failed fork in its own verdict rather than a
full machine. After each verdict the worker (a child subreaper, so detached descendants stay its own) kills whatever
the verifier left running, and that verdict becomes an error; a timeout or `close()` kills the whole group. A worker
whose parent died exits at once and quietly, taking its descendants with it. Without a cgroup the group is the
worker's process tree and the cap is RLIMIT_NPROC, which the kernel does not enforce for real root.

`run_in_process` remains for tests and tools that verify trusted code: no process boundary, no containment.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import multiprocessing.connection
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeGuard

from eval_pipelines.lib.confine import drop_capabilities, restrict_writes_to
from eval_pipelines.lib.proc_group import (
    ProcessGroup,
    become_subreaper,
    cap_user_tasks,
    exit_when_orphaned,
    kill_descendants,
)
from eval_pipelines.lib.redact import install_log_redaction
from eval_pipelines.schemas.artifacts import RunArtifacts, UnreadableArtifacts, read_artifacts_file
from eval_pipelines.schemas.limits import VERIFIER_MAX_TASKS
from eval_pipelines.schemas.runs import DEFAULT_VERIFIER_TIMEOUT_SECONDS
from eval_pipelines.schemas.verifiers import VerifierKind, VerifierOutcome
from eval_pipelines.verifiers import reach
from eval_pipelines.verifiers.loader import load_verifier_package, package_version, verifier_version
from eval_pipelines.verifiers.protocol import VerifierSource, verify_module
from eval_pipelines.verifiers.simlab_view import install_collinear_shims

#: Address-space cap of a verifier worker: far above what reading a rollout's state needs, far below the machine.
VERIFIER_MEMORY_LIMIT_BYTES = 2 << 30
#: Spawning imports pydantic and the schemas; on a busy 2-core machine that can take several seconds.
DEFAULT_WORKER_START_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_WORKER_FAILURES = 3
_STOP_GRACE_SECONDS = 2.0
#: The only environment variables a worker gets (locale, temp dir, search path); secrets stay behind.
_INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")
#: What SimLab exports to its verifiers during `tasks run` (its `[verifier]` settings), less its key
#: (`SIMLAB_VERIFIER_API_KEY`), which never reaches verifier code.
SIMLAB_VERIFIER_SETTINGS = ("SIMLAB_VERIFIER_MODEL", "SIMLAB_VERIFIER_PROVIDER")
SIMLAB_VERIFIER_BASE_URL = "SIMLAB_VERIFIER_BASE_URL"
#: The folder, beneath this process's own cgroup, that holds the workers' cgroups.
WORKER_CGROUP_FAMILY = "eval-pipelines-verifiers"

#: The artifacts object, its JSON-ready dict, its stored bytes (compressed or plain JSON), or the path of its trace
#: file; or why that file could not be read.
ArtifactsRef = RunArtifacts | dict[str, Any] | bytes | str | Path | OSError | UnreadableArtifacts
#: A job on its way to the worker: (job index, artifacts, modules, positions of the modules still to run).
_Pending = tuple[int, ArtifactsRef, tuple[str, ...], tuple[int, ...]]


@dataclass(frozen=True)
class VerifyJob:
    """One rollout to verify: its artifacts (or the path of its JSON trace, read by whoever verifies) and the
    task's verifier modules, in order."""

    artifacts: ArtifactsRef
    modules: tuple[str, ...]


@dataclass(frozen=True)
class VerifierSourceSpec:
    """Where a worker finds the verifiers: a package folder, or an extracted bundle (then `bundle_root` is set
    and `scenario` names the bundle's scenario). Picklable, so it crosses the process boundary."""

    verifiers_dir: Path
    bundle_root: Path | None = None
    scenario: str | None = None

    def open(self) -> VerifierSource:
        if self.bundle_root is None:
            return load_verifier_package(self.verifiers_dir)
        from eval_pipelines.verifiers.bundle import open_extracted_bundle

        return open_extracted_bundle(self.bundle_root).scenario(self.scenario).package


def load_artifacts(ref: ArtifactsRef) -> RunArtifacts:
    if isinstance(ref, RunArtifacts):
        return ref
    if isinstance(ref, dict):
        return RunArtifacts.model_validate(ref)
    if isinstance(ref, bytes):
        return RunArtifacts.from_stored_bytes(ref)
    if isinstance(ref, OSError | UnreadableArtifacts):  # the parent could not read the trace: reported here
        raise ref
    return RunArtifacts.load(ref)


def _read_ref(ref: ArtifactsRef) -> ArtifactsRef:
    """A trace path becomes its stored bytes, read here and parsed by the worker (still compressed: less to send
    through the pipe): the worker may run as a user that cannot open the data dir. A file that cannot be read
    becomes its error, which the worker reports as that rollout's error."""
    if isinstance(ref, str | Path):
        try:
            return read_artifacts_file(ref)
        except (OSError, UnreadableArtifacts) as exc:
            return exc
    return ref


def _preload(source: VerifierSource, verifiers_dir: Path) -> None:
    """Import every verifier module while the worker may still read the package (before dropping privileges);
    the package caches them, and a module that fails to import keeps its error for its verdicts."""
    for path in sorted(verifiers_dir.glob("*.py")):
        if not path.stem.startswith("_"):
            with contextlib.suppress(Exception):
                source.get(path.stem)


def _confine_worker(group_capped: bool) -> None:
    """Cap memory, move into a private temp dir, and confine writes to it (Landlock): from here on the worker
    can change nothing outside that dir (its cgroup's files included), nor read the memory or environment of the
    processes that hold keys. `group_capped`: the parent put it in a cgroup that caps its tasks; if not, the
    worker caps its user's instead."""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (VERIFIER_MEMORY_LIMIT_BYTES, VERIFIER_MEMORY_LIMIT_BYTES))
    workdir = tempfile.mkdtemp(prefix="verifier-")
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = workdir
    os.chdir(workdir)
    restrict_writes_to([Path(workdir)], writable_files=[Path(os.devnull)])
    drop_capabilities()
    if not group_capped:
        cap_user_tasks(VERIFIER_MAX_TASKS)


def _failed(module: str, version: str, message: str) -> VerifierOutcome:
    return VerifierOutcome(
        module=module, verifier_version=version, kind=VerifierKind.PROGRAMMATIC, success=False, reward=0.0,
        message=message, is_error=True,
    )  # fmt: skip


def _unreadable_artifacts(module: str, source: VerifierSource, error: Exception) -> VerifierOutcome:
    version = source.get(module).version
    return _failed(module, version, f"Verifier error: the rollout's artifacts could not be read: {error}")


def run_in_process(source: VerifierSource, jobs: Iterable[VerifyJob]) -> list[list[VerifierOutcome]]:
    """Trusted fast path: every job in this process. A raising verifier is a failed outcome, but a hang or an
    `os._exit` takes this process with it; use IsolatedVerifierRunner for code you did not write."""
    results: list[list[VerifierOutcome]] = []
    for job in jobs:
        try:
            artifacts = load_artifacts(job.artifacts)
        except (OSError, ValueError) as exc:
            results.append([_unreadable_artifacts(m, source, exc) for m in job.modules])
            continue
        results.append([verify_module(source, module, artifacts) for module in job.modules])
    return results


# --- the worker (runs in the child process) ------------------------------------------------------------------


def _verify_guarded(source: VerifierSource, module: str, artifacts: RunArtifacts) -> VerifierOutcome:
    try:
        return verify_module(source, module, artifacts)
    except BaseException as exc:  # KeyboardInterrupt, GeneratorExit raised by verifier code (sys.exit is a verdict)
        return _failed(module, source.get(module).version, f"Verifier error: {type(exc).__name__}: {exc}")


def _contained_verdict(source: VerifierSource, module: str, artifacts: RunArtifacts, worker: int) -> VerifierOutcome:
    """One verdict, after which nothing the verifier started is left running: what is left is killed and costs the
    verdict. `worker`: the worker's pid; a process the verifier forked that returns here ends quietly instead of
    going on as a second worker on the same channel."""
    outcome = _verify_guarded(source, module, artifacts)
    if os.getpid() != worker:
        os._exit(0)
    left = kill_descendants()
    if not left:
        return outcome
    what = f"left {left} process{'es' if left > 1 else ''} running after its verdict (killed)"
    if outcome.is_error:
        return outcome.model_copy(update={"message": f"{outcome.message}; it also {what}"})
    return _failed(module, outcome.verifier_version, f"Verifier error: it {what}")


def _send_outcome(conn: multiprocessing.connection.Connection, message: tuple[Any, ...]) -> None:
    try:
        conn.send(message)
    except Exception as exc:  # PicklingError, TypeError, RecursionError: whatever the output's pickling raised
        # The output did not pickle; the pipe is untouched because pickling happens before writing.
        kind, job_index, position, outcome = message
        safe = outcome.model_copy(update={"output": repr(outcome.output)[:2000]})
        safe.message = f"{safe.message} (output not transferable: {type(exc).__name__})".strip()
        conn.send((kind, job_index, position, safe))


def _worker_main(conn: multiprocessing.connection.Connection, spec: VerifierSourceSpec, group_capped: bool) -> None:
    # The parent owns interruption: Ctrl-C there must not leave half-reported batches here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker = os.getpid()
    try:
        install_collinear_shims()  # before the package's modules import them, as under SimLab
        source = spec.open()
        _preload(source, spec.verifiers_dir)
        # What a module started on import is not any verdict's doing: it goes now, unblamed.
        kill_descendants()
        _confine_worker(group_capped)
        reach.install()  # a failure that came from a server the verifier could not reach is no verdict
    except Exception as exc:
        conn.send(("load_error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] == "stop":
            return
        for job_index, ref, modules, positions in message[1]:
            try:
                artifacts = load_artifacts(ref)
            except (OSError, ValueError) as exc:
                for position in positions:
                    conn.send(("outcome", job_index, position, _unreadable_artifacts(modules[position], source, exc)))
                continue
            for position in positions:
                outcome = _contained_verdict(source, modules[position], artifacts, worker)
                _send_outcome(conn, ("outcome", job_index, position, outcome))
        conn.send(("done",))


# --- the parent -----------------------------------------------------------------------------------------------


class WorkerStartError(RuntimeError):
    """The worker could not load the verifier package (or did not come up in time)."""


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "Verifier process ended without an exit code"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"Verifier process exited with code {exitcode} (killed by {name})"
    return f"Verifier process exited with code {exitcode}"


def worker_entry(fd: int) -> None:
    """The worker process's entry point: the parent's end of the socket pair is `fd`'s peer. It sends the source
    spec and whether the worker's cgroup caps its tasks."""
    become_subreaper()
    exit_when_orphaned(fd)
    install_log_redaction()
    conn = multiprocessing.connection.Connection(fd)
    try:
        spec, group_capped = conn.recv()
        _worker_main(conn, spec, group_capped)
    except (EOFError, OSError):
        pass  # the parent is gone or let go mid-message: there is no one left to report to
    finally:
        kill_descendants()


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    conn: multiprocessing.connection.Connection
    group: ProcessGroup

    def peak_rss_kib(self) -> int | None:
        """The worker's peak resident set size so far (Linux `VmHWM`); None elsewhere or once it has exited."""
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return None

    def kill(self) -> None:
        """Kill the worker and everything it started, wherever in the process tree that went."""
        if self.process.poll() is None:  # not yet waited for, so its pid cannot belong to anyone else
            self.group.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(_STOP_GRACE_SECONDS)
        self.group.release()
        self.conn.close()


def simlab_verifier_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The `SIMLAB_VERIFIER_*` settings of `environ` a verifier worker gets, as SimLab sets them (stripped, only
    those with a value): the model and provider, and the base URL unless it carries credentials."""
    settings = {name: environ.get(name, "").strip() for name in SIMLAB_VERIFIER_SETTINGS}
    base_url = environ.get(SIMLAB_VERIFIER_BASE_URL, "").strip()
    if base_url and not _carries_credentials(base_url):
        settings[SIMLAB_VERIFIER_BASE_URL] = base_url
    return {name: value for name, value in settings.items() if value}


def _carries_credentials(url: str) -> bool:
    try:
        parts = urllib.parse.urlsplit(url)
        return bool(parts.username or parts.password or parts.query or parts.fragment)
    except ValueError:  # what cannot be parsed cannot be shown to be safe
        return True


def _spawn_worker() -> _Worker:
    # A fresh interpreter running only this module, rather than multiprocessing's spawn: spawn re-runs the
    # parent's __main__ in the child (the Dagster CLI, a benchmark script), which costs seconds per restart.
    parent_socket, child_socket = socket.socketpair()
    child_fd = child_socket.fileno()
    # Verifier code must not see this process's environment: API keys live there.
    env = {name: os.environ[name] for name in _INHERITED_ENV if name in os.environ}
    env.update(simlab_verifier_settings(os.environ))
    # The child must import eval_pipelines from wherever this process found it.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"from eval_pipelines.verifiers.isolation import worker_entry; worker_entry({child_fd})",
            ],
            pass_fds=(child_fd,),
            stdin=subprocess.DEVNULL,
            env=env,
        )
    finally:
        child_socket.close()
    # Contained before it is sent anything to run: until then it only starts the interpreter.
    group = ProcessGroup.contain(process.pid, max_tasks=VERIFIER_MAX_TASKS, family=WORKER_CGROUP_FAMILY)
    return _Worker(process, multiprocessing.connection.Connection(parent_socket.detach()), group)


class IsolatedVerifierRunner:
    """`with IsolatedVerifierRunner(verifiers_dir) as runner: outcomes = runner.run(jobs)`.

    Results come back in job order, one outcome per module. The worker is started on first use and reused
    across `run` calls; `close()` stops it.
    """

    def __init__(
        self,
        verifiers_dir: Path,
        *,
        bundle_root: Path | None = None,
        scenario: str | None = None,
        timeout_seconds: float = DEFAULT_VERIFIER_TIMEOUT_SECONDS,
        start_timeout_seconds: float = DEFAULT_WORKER_START_TIMEOUT_SECONDS,
        max_worker_failures: int = DEFAULT_MAX_WORKER_FAILURES,
    ) -> None:
        if timeout_seconds <= 0 or start_timeout_seconds <= 0:
            raise ValueError("timeouts must be positive")
        if max_worker_failures < 1:
            raise ValueError("max_worker_failures must be at least 1")
        self.spec = VerifierSourceSpec(Path(verifiers_dir), bundle_root, scenario)
        self.timeout_seconds = timeout_seconds
        self.start_timeout_seconds = start_timeout_seconds
        self.max_worker_failures = max_worker_failures
        self._worker: _Worker | None = None
        self._versions: dict[str, str] = {}
        #: Worker restarts so far (crashes and timeouts), for monitoring.
        self.restarts = 0
        #: The largest peak RSS of a worker that was stopped cleanly (Linux only), for capacity planning.
        self.worker_peak_rss_kib: int | None = None

    @classmethod
    def for_bundle(cls, bundle: Any, scenario: str | None = None, **options: Any) -> IsolatedVerifierRunner:
        """A runner over a LoadedBundle's scenario (the worker re-imports it from the extracted tree)."""
        chosen = bundle.scenario(scenario)
        return cls(chosen.verifiers_dir, bundle_root=bundle.root, scenario=chosen.scenario_id, **options)

    def version_of(self, module: str) -> str:
        if module not in self._versions:
            self._versions[module] = verifier_version(self.spec.verifiers_dir, module)
        return self._versions[module]

    def _start(self) -> _Worker:
        worker = _spawn_worker()
        try:
            worker.conn.send((self.spec, worker.group.capped))
            if not worker.conn.poll(self.start_timeout_seconds):
                raise WorkerStartError(f"verifier worker did not start within {self.start_timeout_seconds:g}s")
            message = worker.conn.recv()
        except (EOFError, OSError):
            worker.kill()
            raise WorkerStartError(
                f"verifier worker died while loading {self.spec.verifiers_dir}: "
                f"{describe_exit(worker.process.returncode)}"
            ) from None
        except WorkerStartError:
            worker.kill()
            raise
        if message[0] != "ready":
            worker.kill()
            raise WorkerStartError(f"verifier worker could not load {self.spec.verifiers_dir}: {message[1]}")
        return worker

    def start(self) -> None:
        """Start the worker now (it loads the package); WorkerStartError when the package cannot be loaded."""
        self._ensure_worker()

    @property
    def is_running(self) -> bool:
        """Whether a worker is up (started and not stopped or discarded since)."""
        return self._worker is not None

    def _ensure_worker(self) -> _Worker:
        if self._worker is None:
            self._worker = self._start()
        return self._worker

    def _discard_worker(self, *, exiting: bool = False) -> int | None:
        """Kill and forget the worker; `exiting`: it closed its end, so let it finish dying to learn its exit code."""
        worker, self._worker = self._worker, None
        if worker is None:
            return None
        if exiting:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(_STOP_GRACE_SECONDS)
        worker.kill()
        self.restarts += 1
        return worker.process.returncode

    def run(self, jobs: Sequence[VerifyJob]) -> list[list[VerifierOutcome]]:
        results: list[list[VerifierOutcome | None]] = [[None] * len(job.modules) for job in jobs]
        pending: list[_Pending] = [
            (i, _read_ref(job.artifacts), job.modules, tuple(range(len(job.modules))))
            for i, job in enumerate(jobs)
            if job.modules
        ]
        failures: dict[str, int] = {}
        while pending:
            pending = self._skip_broken(pending, failures, results)
            if pending:
                pending = self._run_batch(pending, failures, results)
        return [[outcome for outcome in row if outcome is not None] for row in results]

    def _skip_broken(
        self, pending: list[_Pending], failures: dict[str, int], results: list[list[VerifierOutcome | None]]
    ) -> list[_Pending]:
        broken = {m for m, count in failures.items() if count >= self.max_worker_failures}
        if not broken:
            return pending
        remaining: list[_Pending] = []
        for job_index, ref, modules, positions in pending:
            keep = []
            for position in positions:
                module = modules[position]
                if module in broken:
                    results[job_index][position] = _failed(
                        module,
                        self.version_of(module),
                        f"Verifier skipped: it stopped the verifier process {failures[module]} times in this run",
                    )
                else:
                    keep.append(position)
            if keep:
                remaining.append((job_index, ref, modules, tuple(keep)))
        return remaining

    def _run_batch(
        self, pending: list[_Pending], failures: dict[str, int], results: list[list[VerifierOutcome | None]]
    ) -> list[_Pending]:
        """Send the batch; return what is left to run when the worker had to be replaced, else []."""
        worker = self._ensure_worker()
        # The worker reports in exactly this order, so the first unreported pair is the one that was running.
        expected = [(k, n) for k, item in enumerate(pending) for n in range(len(item[3]))]
        worker.conn.send(("batch", pending))
        cursor = 0
        while True:
            unreadable = False
            try:
                ready = worker.conn.poll(self.timeout_seconds)
                message = worker.conn.recv() if ready else None
            except (EOFError, OSError):
                message, ready = None, True
            except Exception:  # bytes that do not unpickle: verifier code wrote to the channel
                message, ready, unreadable = None, True, True
            if cursor < len(expected) and _is_outcome(message, pending, expected[cursor]):
                _, job_index, position, outcome = message
                results[job_index][position] = outcome
                cursor += 1
                continue
            if message == ("done",) and cursor == len(expected):
                return []
            if cursor >= len(expected):
                # Everything was reported but the end marker was lost with the worker: nothing is left to run.
                self._discard_worker()
                return []
            k, n = expected[cursor]
            job_index, ref, modules, positions = pending[k]
            module = modules[positions[n]]
            if not ready:
                self._discard_worker()
                reason = f"Verifier timed out after {self.timeout_seconds:g}s"
            elif message is not None or unreadable:
                self._discard_worker()
                reason = "Verifier process sent an unexpected message on its result channel"
            else:
                reason = describe_exit(self._discard_worker(exiting=True))
            results[job_index][positions[n]] = _failed(module, self.version_of(module), reason)
            failures[module] = failures.get(module, 0) + 1
            rest: list[_Pending] = [(job_index, ref, modules, positions[n + 1 :])] if positions[n + 1 :] else []
            return rest + pending[k + 1 :]

    def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        peak = worker.peak_rss_kib()
        if peak is not None:
            self.worker_peak_rss_kib = max(peak, self.worker_peak_rss_kib or 0)
        with contextlib.suppress(OSError, ValueError):
            worker.conn.send(("stop",))
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(_STOP_GRACE_SECONDS)
        worker.kill()

    def __enter__(self) -> IsolatedVerifierRunner:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


#: Most rollouts one round trip to a package's worker carries: enough to drain what piles up while it is busy,
#: few enough that a batch's message stays a few hundred kilobytes.
MAX_POOL_BATCH = 64

#: How long a package's drain thread waits for the next verification before it ends.
DRAIN_LINGER_SECONDS = 0.5


@dataclass
class _Package:
    """One verifier package's worker and the verifications waiting for it.

    Verdicts come due in bursts (rollouts of the same shape finish together): those that arrive while the worker
    is busy wait here and go to it together as one batch when it is free, rather than queueing behind a lock
    for a round trip each. `lock` is held around every use of the runner (a batch, warming, closing)."""

    runner: IsolatedVerifierRunner
    #: The package's content hash when its worker was made; a run leases the package of the version it started on.
    version: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: list[tuple[VerifyJob, concurrent.futures.Future[list[VerifierOutcome]]]] = field(default_factory=list)
    #: Whether a thread is draining `waiting` (guarded by `mutex`); one at a time, so the batches stay whole.
    draining: bool = False
    mutex: threading.Lock = field(default_factory=threading.Lock)
    #: Signalled (under `mutex`) when a job is queued while a drainer waits for more.
    arrived: threading.Condition = field(init=False, repr=False)
    #: Guarded by the pool's `_guard`: runs and verifications holding the package, when it was last let go,
    #: and whether a newer version took its place (it is stopped once nobody holds it).
    users: int = 0
    last_used: float = field(default_factory=time.monotonic)
    retired: bool = False

    def __post_init__(self) -> None:
        self.arrived = threading.Condition(self.mutex)

    def submit(self, job: VerifyJob) -> concurrent.futures.Future[list[VerifierOutcome]]:
        future: concurrent.futures.Future[list[VerifierOutcome]] = concurrent.futures.Future()
        with self.mutex:
            self.waiting.append((job, future))
            if self.draining:
                self.arrived.notify()
                return future
            self.draining = True
        threading.Thread(target=self._drain, name="verifier-batches", daemon=True).start()
        return future

    def _drain(self) -> None:
        while True:
            with self.mutex:
                if not self.waiting:
                    # Verdicts of a running sweep come due every few milliseconds: lingering a moment spares
                    # starting a thread per burst, which was a visible share of a rollout's CPU.
                    self.arrived.wait(DRAIN_LINGER_SECONDS)
                taken, self.waiting = self.waiting[:MAX_POOL_BATCH], self.waiting[MAX_POOL_BATCH:]
                if not taken:
                    self.draining = False
                    return
            # A caller that stopped waiting (its rollout was cancelled) drops out; the rest can no longer cancel.
            batch = [(job, future) for job, future in taken if future.set_running_or_notify_cancel()]
            if not batch:
                continue
            try:
                with self.lock:
                    verdicts = self._verify([job for job, _ in batch])
            except BaseException as exc:  # handed to every caller of the batch, whose wait raises it
                for _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, future), outcomes in zip(batch, verdicts, strict=True):
                future.set_result(outcomes)

    def _verify(self, jobs: list[VerifyJob]) -> list[list[VerifierOutcome]]:
        try:
            return self.runner.run(jobs)
        except WorkerStartError as exc:
            return [
                [_failed(m, self.runner.version_of(m), f"Verifier error: {exc}") for m in job.modules] for job in jobs
            ]

    def warm(self) -> None:
        with self.lock, contextlib.suppress(WorkerStartError):
            self.runner.start()

    @property
    def warm_already(self) -> bool:
        return self.runner.is_running

    def close(self) -> None:
        with self.lock:
            self.runner.close()


def _verify_job(artifacts: RunArtifacts, modules: Sequence[str]) -> VerifyJob:
    # JSON text, encoded by pydantic's compiled serializer: a nested dict would be built in Python, pickled
    # and validated field by field on the other side.
    return VerifyJob(artifacts.model_dump_json().encode(), tuple(modules))


#: How long a package's worker may sit unused before the pool stops it (a service serving many scenarios would
#: otherwise keep a worker per scenario it ever ran).
DEFAULT_POOL_IDLE_SECONDS = 600.0


class VerifierPool:
    """Contained verification for a process that verifies rollouts one by one as they finish (the rollout engine):
    one `IsolatedVerifierRunner` per verifier package (and verifier timeout), kept warm and fed from a thread of
    its own, so the event loop never waits on verifier code and a verifier's crash costs one verdict (the runner
    replaces its worker). Verifications that arrive while the worker is busy go to it together as one batch
    (`_Package`).

    One pool serves every run of a process: a run of one rollout would otherwise pay a worker's start-up (an
    interpreter, the schemas, the package) for one verdict. A run `lease`s its package when it starts: the
    lease pins the package version current then, so every verdict of the run comes from one version; a run
    that starts after the package changed gets a new worker, and the old one stops once its last run is done.
    A worker unused for `idle_seconds` is stopped."""

    def __init__(
        self,
        timeout_seconds: float = DEFAULT_VERIFIER_TIMEOUT_SECONDS,
        *,
        idle_seconds: float = DEFAULT_POOL_IDLE_SECONDS,
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self.idle_seconds = idle_seconds
        self._packages: dict[tuple[Path, float], _Package] = {}
        self._guard = threading.Lock()

    def _acquire(self, verifiers_dir: Path, timeout_seconds: float, version: str | None) -> _Package:
        """The package's current `_Package`, held (`users`) until `_release`; `version`: the one the caller
        needs, replacing a package of another version (None: whichever is current)."""
        key = (verifiers_dir, timeout_seconds)
        stopping: list[_Package] = []
        with self._guard:
            stopping += self._take_idle()
            package = self._packages.get(key)
            if package is None or (version is not None and package.version != version):
                if package is not None:
                    package.retired = True
                    if package.users == 0:
                        stopping.append(package)
                # Each rollout's verdict stands on its own: a module that keeps crashing the worker is retried
                # for every rollout, instead of being skipped for the rest of whichever batch its failures fell in.
                runner = IsolatedVerifierRunner(
                    verifiers_dir, timeout_seconds=timeout_seconds, max_worker_failures=sys.maxsize
                )
                package = _Package(runner, version if version is not None else package_version(verifiers_dir))
                self._packages[key] = package
            package.users += 1
        _stop_in_background(stopping)
        return package

    def _release(self, package: _Package) -> None:
        with self._guard:
            package.users -= 1
            package.last_used = time.monotonic()
            stop = package.retired and package.users == 0
        if stop:
            _stop_in_background([package])

    def _take_idle(self) -> list[_Package]:
        """Under `_guard`: remove and return the packages nobody has held for `idle_seconds`."""
        now = time.monotonic()
        idle = [
            key
            for key, package in self._packages.items()
            if package.users == 0 and now - package.last_used > self.idle_seconds
        ]
        return [self._packages.pop(key) for key in idle]

    def lease(self, verifiers_dir: Path, timeout_seconds: float | None = None) -> VerifierLease:
        """Hold the package's worker for one run, at the package's version now (release the lease when the run
        ends). Reads the package's sources once, to know its version."""
        timeout = timeout_seconds or self.timeout_seconds
        package = self._acquire(verifiers_dir, timeout, package_version(verifiers_dir))
        return VerifierLease(self, verifiers_dir, package)

    def warm(self, verifiers_dir: Path) -> None:
        """Blocking: start the package's worker now, so the first verdicts of a run do not wait for its start-up
        (a fifth of a second of imports and loading, which every rollout of the first wave would wait out).
        A package that cannot load is left to the first verification, which reports it as that verdict."""
        package = self._acquire(verifiers_dir, self.timeout_seconds, None)
        try:
            package.warm()
        finally:
            self._release(package)

    def submit(
        self, verifiers_dir: Path, modules: Sequence[str], artifacts: RunArtifacts
    ) -> concurrent.futures.Future[list[VerifierOutcome]]:
        """Queue one rollout's verification; the future holds its outcomes, one per module."""
        package = self._acquire(verifiers_dir, self.timeout_seconds, None)
        future = package.submit(_verify_job(artifacts, modules))
        future.add_done_callback(lambda _: self._release(package))
        return future

    def verify_now(self, verifiers_dir: Path, modules: Sequence[str], artifacts: RunArtifacts) -> list[VerifierOutcome]:
        """Blocking: run the task's verifiers over one rollout's artifacts in the package's worker."""
        return self.submit(verifiers_dir, modules, artifacts).result()

    async def verify(
        self, verifiers_dir: Path, modules: Sequence[str], artifacts: RunArtifacts
    ) -> list[VerifierOutcome]:
        return await asyncio.wrap_future(self.submit(verifiers_dir, modules, artifacts))

    def close(self) -> None:
        """Stop every worker (blocking)."""
        with self._guard:
            packages, self._packages = list(self._packages.values()), {}
        for package in packages:
            package.close()


def _stop_in_background(packages: list[_Package]) -> None:
    # Whoever let go of a package (a run ending, a run starting) must not wait for its worker to stop.
    if packages:
        threading.Thread(target=_stop_all, args=(packages,), name="stop-verifier-workers", daemon=True).start()


def _stop_all(packages: list[_Package]) -> None:
    for package in packages:
        package.close()


class VerifierLease:
    """One run's hold on its verifier package's shared worker (`VerifierPool.lease`): every verification of the
    run goes to the package version that was current when the run started. `release()` when the run ends."""

    def __init__(self, pool: VerifierPool, verifiers_dir: Path, package: _Package) -> None:
        self.pool = pool
        self.verifiers_dir = verifiers_dir
        self.version = package.version
        self._package: _Package | None = package

    @property
    def needs_warming(self) -> bool:
        return self._package is not None and not self._package.warm_already

    def warm(self) -> None:
        """Blocking: start the worker unless it runs already (see `VerifierPool.warm`)."""
        if self._package is not None:
            self._package.warm()

    async def verify(
        self, verifiers_dir: Path, modules: Sequence[str], artifacts: RunArtifacts
    ) -> list[VerifierOutcome]:
        if self._package is None:
            raise RuntimeError("the verifier lease was released: its run is over")
        if verifiers_dir != self.verifiers_dir:
            raise ValueError(f"this run's verifiers are {self.verifiers_dir}, not {verifiers_dir}")
        return await asyncio.wrap_future(self._package.submit(_verify_job(artifacts, modules)))

    def release(self) -> None:
        package, self._package = self._package, None
        if package is not None:
            self.pool._release(package)


def _is_outcome(
    message: Any, pending: list[_Pending], expected: tuple[int, int]
) -> TypeGuard[tuple[str, int, int, VerifierOutcome]]:
    """The worker's report for the pair the parent is waiting on, and nothing else."""
    if not (isinstance(message, tuple) and len(message) == 4 and message[0] == "outcome"):
        return False
    k, n = expected
    return message[1:3] == (pending[k][0], pending[k][3][n]) and isinstance(message[3], VerifierOutcome)


def run_jobs(
    jobs: Sequence[VerifyJob],
    verifiers_dir: Path,
    *,
    isolated: bool,
    timeout_seconds: float = DEFAULT_VERIFIER_TIMEOUT_SECONDS,
) -> list[list[VerifierOutcome]]:
    """One call for both paths: isolated (a worker process with timeouts) or in process (trusted code)."""
    if not isolated:
        return run_in_process(load_verifier_package(verifiers_dir), jobs)
    with IsolatedVerifierRunner(verifiers_dir, timeout_seconds=timeout_seconds) as runner:
        return runner.run(jobs)


__all__ = [
    "DEFAULT_MAX_WORKER_FAILURES",
    "DEFAULT_VERIFIER_TIMEOUT_SECONDS",
    "SIMLAB_VERIFIER_SETTINGS",
    "IsolatedVerifierRunner",
    "VerifierLease",
    "VerifierPool",
    "VerifierSourceSpec",
    "VerifyJob",
    "WorkerStartError",
    "describe_exit",
    "load_artifacts",
    "run_in_process",
    "run_jobs",
    "simlab_verifier_settings",
    "worker_entry",
]
