"""A built-in files/coding tool server: one directory on disk per workspace, with file tools and `run_command`.

The disk is the truth; the state is a mirror of it. After every mutating call (`write_file`, `run_command`)
the `files` collection is rebuilt from the directory, so snapshots, per-call diffs and verifiers see exactly
what is on disk: `files[<relative path>] = {path, type, size, sha256, content, truncated, binary}` (text
content cut at 64 KiB; symbolic links as `{path, type: "symlink", target}`; at most 2000 entries).

What is and is not confined
---------------------------
The FILE tools (`read_file`, `write_file`, `list_dir`) only ever touch paths inside the workspace: every path
is resolved (following symbolic links) and refused when it is absolute, contains a NUL byte or resolves
outside the workspace root (`..`, or a symlink pointing outside, for reading through it as for writing
through it). Non-regular files (FIFOs, devices) are refused, so a tool call can never block on one, and so
are files with several hard links, since another link may lie outside the workspace.

`run_command` runs `/bin/sh -c <command>` with the workspace as its working directory, a minimal environment
(`PATH` and `HOME=<workspace>`, nothing inherited from this process, so no secrets), stdin closed, with its
output truncated. Before the shell starts, a launcher (`lib/confine.py`) caps its address space, CPU time and
file size, and moves it into a sandbox of Linux namespaces (`lib/sandbox.py`; no daemon, no extra package):

- files: a root of its own. The workspace is read-write at the same path as on the host; `/usr`, `/bin`,
  `/sbin`, `/lib*` and `/etc` are read-only (without `/etc/shadow`, `/etc/gshadow`, `/etc/sudoers*`,
  `/etc/ssh` and `/etc/ssl/private`); `/tmp` and `/dev/shm` are fresh and capped at the file-size limit;
  `/dev` holds only null, zero, full, random, urandom and tty. Home directories, the project, the host's
  `/tmp`, other workspaces, `/opt`, `/var`, `/run`, `/sys` and every other file of the host are not there.
- processes: a PID namespace whose init is the launcher; `ps` and `/proc` show the command's own processes
  only. When the shell exits, or the timeout kills the launcher's process group, the kernel kills every
  process left in the namespace, those that called `setsid` included.
- network: a namespace with only its own loopback; neither the host's loopback services nor anything beyond.
- IPC: a namespace of its own (no System V shared memory of the host).
- Landlock still confines writes to the workspace and the sandbox's `/tmp` and `/dev/shm`, and every
  capability is dropped.

What it does NOT isolate: CPU and memory beyond the per-process limits (no cgroup: many processes may each use
up to the limits until the timeout), the kernel itself (no seccomp filter: a kernel exploit escapes), what the
readable system directories contain, and time (timing side channels). The host as root needs nothing more;
as another user it uses a user namespace (mapped to that user), where the kernel allows one.

Once per process, when the server is built, a trial launch asks the kernel for the namespaces. Where it
refuses (no user namespaces for this user, a container without the privilege), the command runs with Landlock,
no capabilities and the limits only: it can then read what the server's user can read, see the host's
processes and reach the network. That is logged as a warning, and the tool host's `/health` reports it
(`command_sandbox`: `namespaces`, `landlock-only` or `limits-only`). `EVAL_PIPELINES_COMMAND_WRAPPER` still
prefixes a command of your choice to the launcher (a container, `firejail --`), the check included.

A command that times out or exits non-zero is an ordinary observation, not an `is_error` one: it ran and
may have changed files, and an error would make the app roll the mirror back while the disk kept the
changes. Errors are reserved for calls that changed nothing (bad parameters, refused paths).

`run_command` is synchronous, like every tool call in `app.py`: a long command holds the event loop of the
app it is mounted in for up to its timeout (60 s at most).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import copy
import functools
import hashlib
import logging
import math
import os
import selectors
import shlex
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from eval_pipelines.lib.confine import abi_version, confined_argv
from eval_pipelines.toolservers.base import (
    BuiltinToolServer,
    SeedError,
    State,
    StateNotRestorable,
    ToolContext,
    ToolError,
    seed_objects,
    tool,
)
from eval_pipelines.toolservers.fields import object_schema, string_param

MIRROR_CONTENT_BYTES = 64 * 1024
READ_LIMIT_BYTES = 64 * 1024
OUTPUT_LIMIT_BYTES = 16 * 1024
MAX_WRITE_CHARS = 1_000_000
MAX_MIRRORED_ENTRIES = 2000
MAX_LISTED_ENTRIES = 500
DEFAULT_TIMEOUT_SECONDS = 10
MAX_TIMEOUT_SECONDS = 60
#: Address space of a model's command: enough for compilers and interpreters, far below the machine.
COMMAND_MEMORY_BYTES = 2 << 30
#: The largest file a model's command may write.
COMMAND_FILE_BYTES = 64 << 20
#: A command prefixed to every `run_command` launch (a stronger sandbox: bwrap, firejail, a container).
COMMAND_WRAPPER_ENV = "EVAL_PIPELINES_COMMAND_WRAPPER"
COMMAND_PATH = "/usr/local/bin:/usr/bin:/bin"
#: after the command's own process exits, how long to keep collecting output already in flight.
_DRAIN_SECONDS = 0.2
_POLL_SECONDS = 0.05
_EXIT_POLL_SECONDS = 0.001

#: How `run_command` is isolated on this host: see `command_sandbox`.
SANDBOX_NAMESPACES = "namespaces"
SANDBOX_LANDLOCK_ONLY = "landlock-only"
SANDBOX_LIMITS_ONLY = "limits-only"
#: How long the one-off check that the kernel grants the namespaces may take.
_SANDBOX_PROBE_SECONDS = 20

logger = logging.getLogger(__name__)

#: The largest placeholder a restored workspace makes for a file whose content was not recorded (sparse).
_MAX_PLACEHOLDER_BYTES = 1 << 40
_SEED_KEYS = {"files"}
_SEED_FILE_KEYS = {"path", "content"}


class WorkspaceDirectory:
    """The on-disk directory of one workspace: created on first use, deleted when nothing refers to it.

    app.py has no hook for deleting a workspace, so the directory is tied to the state object instead:
    when the workspace (and with it every copy of its state) is dropped, the TemporaryDirectory's own
    finalizer removes the tree.
    """

    def __init__(self, parent: Path) -> None:
        self._parent = parent
        self._directory: tempfile.TemporaryDirectory[str] | None = None
        #: files of a restored workspace whose content the snapshot did not hold (binary, or over the mirror's
        #: 64 KiB): they stand on disk as placeholders of their size, which no tool may pass off as the content.
        self.unrecorded: frozenset[str] = frozenset()

    @property
    def created(self) -> bool:
        return self._directory is not None

    def path(self) -> Path:
        if self._directory is None:
            self._directory = tempfile.TemporaryDirectory(prefix="ws-", dir=self._parent, ignore_cleanup_errors=True)
        return Path(os.path.realpath(self._directory.name))


class FilesState(dict[str, dict[str, dict[str, Any]]]):
    """A files-server state: the mirrored collections, plus the workspace directory they mirror.

    The app deep-copies a state before each mutating call (to diff and roll back) and before seeding. Every
    such copy describes the same workspace, so copies share the directory instead of duplicating it.
    Serialised (JSON, pickle), it is a plain dict: the directory never leaves the process.
    """

    def __init__(self, directory: WorkspaceDirectory, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.directory = directory

    def __deepcopy__(self, memo: dict[int, Any]) -> FilesState:
        clone = FilesState(self.directory)
        memo[id(self)] = clone
        for key, value in self.items():
            clone[key] = copy.deepcopy(value, memo)
        return clone

    def __copy__(self) -> FilesState:
        return FilesState(self.directory, self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


def _restore_file(root: Path, relative: str, entry: dict[str, Any]) -> bool:
    """Write a mirrored file back under `root`: its content when the mirror holds all of it and it hashes as
    recorded (True), else a placeholder of its recorded size (False)."""
    content, size = entry.get("content"), entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= _MAX_PLACEHOLDER_BYTES:
        raise ToolError("expected a 'size' in bytes")
    if isinstance(content, str) and not entry.get("truncated"):
        FilesServer._write(root, relative, content, "path")
        if hashlib.sha256(content.encode("utf-8")).hexdigest() == entry.get("sha256"):
            return True
    target = confine(root, relative, "path")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        os.ftruncate(fd, size)  # sparse: the size list_dir shows, at no cost in disk
    finally:
        os.close(fd)
    return False


def _display(root: Path, target: Path) -> str:
    relative = target.relative_to(root).as_posix()
    return relative if relative != "." else "."


def confine(root: Path, raw: str, parameter: str) -> Path:
    """`raw` resolved inside `root` (symlinks followed), or ToolError naming the parameter and the problem."""
    if "\x00" in raw:
        raise ToolError(f"Parameter '{parameter}': the path contains a NUL byte")
    if not raw.strip():
        raise ToolError(f"Parameter '{parameter}': the path is empty")
    if PurePosixPath(raw).is_absolute():
        raise ToolError(
            f"Parameter '{parameter}': absolute paths are not allowed ({raw!r}); use a path relative to the "
            "workspace root"
        )
    target = Path(os.path.realpath(root / raw))
    if target != root and root not in target.parents:
        raise ToolError(
            f"Parameter '{parameter}': {raw!r} is outside the workspace (paths may not leave it through '..' "
            "or symbolic links)"
        )
    return target


def _lexically_safe(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError("expected a non-empty relative path")
    if "\x00" in raw:
        raise ToolError("the path contains a NUL byte")
    path = PurePosixPath(raw)
    if path.is_absolute() or ".." in path.parts:
        raise ToolError(f"{raw!r} must be a relative path inside the workspace")
    return raw


def _refusal(shown: str, info: os.stat_result, parameter: str = "path") -> str:
    if not stat.S_ISREG(info.st_mode):
        return f"Parameter '{parameter}': '{shown}' is not a regular file"
    # A second hard link may live outside the workspace, and reading or writing would reach through it.
    return f"Parameter '{parameter}': '{shown}' has {info.st_nlink} hard links; refusing to touch a file shared by path"


def _describe_text(head: bytes, complete: bool) -> str | None:
    """`head` as text, or None when it looks binary. A multi-byte character cut by truncation is dropped."""
    if b"\x00" in head:
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        return decoder.decode(head, final=complete)
    except UnicodeDecodeError:
        return None


def _file_entry(relative: str, full: Path) -> dict[str, Any] | None:
    digest = hashlib.sha256()
    head = b""
    size = 0
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None  # vanished or unreadable between listing and reading: not part of the mirror
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            if len(head) < MIRROR_CONTENT_BYTES:
                head += chunk[: MIRROR_CONTENT_BYTES - len(head)]
            digest.update(chunk)
            size += len(chunk)
    content = _describe_text(head, complete=size <= MIRROR_CONTENT_BYTES)
    return {
        "path": relative,
        "type": "file",
        "size": size,
        "sha256": digest.hexdigest(),
        "content": content,
        "truncated": size > MIRROR_CONTENT_BYTES,
        "binary": content is None,
    }


def mirror(root: Path) -> dict[str, dict[str, Any]]:
    """The `files` collection for the directory `root`, in sorted path order."""
    entries: dict[str, dict[str, Any]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            if len(entries) >= MAX_MIRRORED_ENTRIES:
                return entries
            full = base / name
            relative = full.relative_to(root).as_posix()
            try:
                mode = os.lstat(full).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                with contextlib.suppress(OSError):
                    entries[relative] = {"path": relative, "type": "symlink", "target": os.readlink(full)}
            elif stat.S_ISREG(mode):
                entry = _file_entry(relative, full)
                if entry is not None:
                    entries[relative] = entry
    return entries


def _kill_group(pgid: int) -> None:
    # The group may already be empty, or (if a member called setsid) partly out of reach: both are fine.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _leader_exited(pid: int) -> bool:
    # WNOWAIT leaves the exited leader a zombie, which keeps its pid (= the group id) from being reused
    # until the group has been killed and the leader reaped.
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class _Capture:
    """The first OUTPUT_LIMIT_BYTES of one stream, counting what was dropped."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = OUTPUT_LIMIT_BYTES - len(self.head)
        self.head += data[:room]
        self.dropped += max(0, len(data) - room)

    def text(self) -> str:
        text = bytes(self.head).decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[... {self.dropped} more byte(s) not shown]"
        return text


@dataclass(frozen=True)
class CommandSandbox:
    """How this host isolates `run_command`: `mode` is one of the SANDBOX_* values; `reason` says why the
    namespaces are missing when they are."""

    mode: str
    reason: str = ""


def _launcher_argv(root: Path, argv: list[str], timeout_seconds: float, sandbox: bool) -> list[str]:
    wrapper = shlex.split(os.environ.get(COMMAND_WRAPPER_ENV, ""))
    return wrapper + confined_argv(
        argv,
        writable=root,
        memory_bytes=COMMAND_MEMORY_BYTES,
        cpu_seconds=math.ceil(timeout_seconds) + 1,
        file_bytes=COMMAND_FILE_BYTES,
        sandbox=sandbox,
    )


@functools.cache
def _probe_sandbox(wrapper: str) -> CommandSandbox:
    # Once per process and wrapper: a command that asked for namespaces the kernel refuses would fail (the
    # launcher never runs a command half-isolated), so the check decides up front, and says so loudly.
    with tempfile.TemporaryDirectory(prefix="sandbox-probe-") as probe:
        try:
            done = subprocess.run(
                _launcher_argv(Path(probe), ["/bin/true"], 1, sandbox=True),
                env={"PATH": COMMAND_PATH},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_SANDBOX_PROBE_SECONDS,
            )
            refusal = "" if done.returncode == 0 else done.stderr.decode(errors="replace").strip()
            refusal = refusal or ("" if done.returncode == 0 else f"the launcher exited {done.returncode}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            refusal = str(exc)
    if not refusal:
        return CommandSandbox(SANDBOX_NAMESPACES)
    fallback = CommandSandbox(SANDBOX_LANDLOCK_ONLY if abi_version() >= 1 else SANDBOX_LIMITS_ONLY, refusal)
    logger.warning(
        "run_command is NOT sandboxed in namespaces on this host (%s); it runs %s: a model's commands can read "
        "every file this user can read, see every process and reach the network",
        refusal,
        fallback.mode,
    )
    return fallback


def command_sandbox() -> CommandSandbox:
    """The isolation `run_command` gets here (checked once per process and `EVAL_PIPELINES_COMMAND_WRAPPER`)."""
    return _probe_sandbox(os.environ.get(COMMAND_WRAPPER_ENV, ""))


def run_confined_command(root: Path, command: str, timeout_seconds: float) -> tuple[int | None, str, str, bool]:
    """Run `command` in `root`; return (exit code or None, stdout, stderr, timed_out). See the module docs."""
    sandbox = command_sandbox().mode == SANDBOX_NAMESPACES
    process = subprocess.Popen(
        _launcher_argv(root, ["/bin/sh", "-c", command], timeout_seconds, sandbox),
        cwd=root,
        env={"PATH": COMMAND_PATH, "HOME": str(root)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    assert process.stdout is not None and process.stderr is not None
    out, err = _Capture(), _Capture()
    captures = {process.stdout.fileno(): out, process.stderr.fileno(): err}
    deadline = time.monotonic() + timeout_seconds
    timed_out = False
    drain_until: float | None = None
    exit_wait = _EXIT_POLL_SECONDS
    with selectors.DefaultSelector() as selector:
        for stream in (process.stdout, process.stderr):
            selector.register(stream, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if drain_until is None and now >= deadline:
                timed_out = True
                break
            if drain_until is not None and (now >= drain_until or not selector.get_map()):
                break
            if selector.get_map():
                ready = selector.select(_POLL_SECONDS)
            else:
                # Both streams are closed, so the launcher is exiting (in the sandbox, after its namespaces are
                # torn down): a select on nothing would sleep its whole period, a few times the exit itself.
                time.sleep(exit_wait)
                exit_wait, ready = min(2 * exit_wait, _POLL_SECONDS), []
            for key, _ in ready:
                data = os.read(key.fd, 65536)
                if data:
                    captures[key.fd].add(data)
                else:
                    selector.unregister(key.fileobj)
            # Output closed or not, the call ends with the command's own process: a background child that
            # keeps the pipes open must not turn every call into a timeout.
            if drain_until is None and _leader_exited(process.pid):
                drain_until = time.monotonic() + _DRAIN_SECONDS
    _kill_group(process.pid)
    returncode = process.wait()
    process.stdout.close()
    process.stderr.close()
    return (None if timed_out else returncode), out.text(), err.text(), timed_out


class FilesServer(BuiltinToolServer):
    """Files and coding tools over one directory per workspace, under a temporary root owned by this object."""

    name: ClassVar[str] = "files"
    collection_nouns: ClassVar[dict[str, str]] = {"files": "file(s)"}

    def __init__(self, root: Path | None = None) -> None:
        self._owned_root: tempfile.TemporaryDirectory[str] | None = None
        if root is None:
            self._owned_root = tempfile.TemporaryDirectory(prefix="eval-files-", ignore_cleanup_errors=True)
            root = Path(self._owned_root.name)
        root.mkdir(parents=True, exist_ok=True)
        self.root = Path(os.path.realpath(root))
        command_sandbox()  # at startup, so a host without namespaces warns before the first rollout

    # -- state -----------------------------------------------------------------------------------------

    def new_state(self) -> State:
        return FilesState(WorkspaceDirectory(self.root), {"files": {}})

    @staticmethod
    def workspace_root(state: State) -> Path:
        """The directory a state mirrors (created now if it does not exist yet)."""
        if not isinstance(state, FilesState):
            raise TypeError("a files-server state must come from FilesServer.new_state()")
        return state.directory.path()

    def refresh(self, state: State) -> None:
        """Rebuild the `files` collection from disk."""
        state["files"] = mirror(self.workspace_root(state))

    def restore_state(self, snapshot: Mapping[str, Any]) -> State:
        """A fresh directory holding the files `snapshot` mirrors: each text file recorded in full is written
        again (and checked against its recorded sha256), each symbolic link made again; a file whose content
        was not recorded stands as a placeholder of its size, and reading it or running a command is refused
        (`StateNotRestorable`). Modes and empty directories are not in a snapshot and are not restored."""
        files = snapshot.get("files", {})
        if not isinstance(files, dict) or set(snapshot) - {"files"}:
            raise StateNotRestorable("a files-server snapshot holds one collection, 'files', an object of entries")
        if len(files) >= MAX_MIRRORED_ENTRIES:
            raise StateNotRestorable(
                f"the snapshot lists the mirror's limit of {MAX_MIRRORED_ENTRIES} entries: the workspace may have "
                "held files it does not record"
            )
        directory = WorkspaceDirectory(self.root)
        root = directory.path()
        unrecorded: list[str] = []
        links: list[tuple[str, str]] = []
        for relative, entry in files.items():
            try:
                if not isinstance(entry, dict) or entry.get("path") != _lexically_safe(relative):
                    raise ToolError("expected an entry whose 'path' is its key")
                if entry.get("type") == "symlink" and isinstance(entry.get("target"), str):
                    links.append((relative, entry["target"]))
                elif entry.get("type") != "file":
                    raise ToolError("expected a 'file' or 'symlink' entry")
                elif not _restore_file(root, relative, entry):
                    unrecorded.append(relative)
            except (ToolError, OSError) as exc:
                raise StateNotRestorable(f"files[{relative!r}]: {exc}") from None
        for relative, target in links:  # after the files, so no file is written through a link
            try:
                link = confine(root, str(PurePosixPath(relative).parent), "path") / PurePosixPath(relative).name
                link.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(target, link)
            except (ToolError, OSError) as exc:
                raise StateNotRestorable(f"files[{relative!r}]: {exc}") from None
        directory.unrecorded = frozenset(unrecorded)
        return FilesState(directory, {"files": {key: dict(entry) for key, entry in files.items()}})

    def _refuse_unrecorded(self, state: State, tool_name: str, params: dict[str, Any]) -> None:
        """A restored workspace never answers with a placeholder: reading one, or running a command that could
        read one, is refused."""
        unrecorded = state.directory.unrecorded if isinstance(state, FilesState) else frozenset()
        if not unrecorded:
            return
        if tool_name == "run_command":
            shown = ", ".join(sorted(unrecorded)[:5])
            raise StateNotRestorable(
                f"the rollout's end state did not record the content of {len(unrecorded)} file(s) ({shown}): a "
                "command in the restored workspace would not see the workspace as the agent left it"
            )
        if tool_name == "read_file" and isinstance(params.get("path"), str):
            root = self.workspace_root(state)
            target = confine(root, params["path"], "path")
            if target != root and target.relative_to(root).as_posix() in unrecorded:
                raise StateNotRestorable(
                    f"the rollout's end state did not record the content of '{params['path']}' (binary, or over "
                    f"{MIRROR_CONTENT_BYTES // 1024} KiB): the restored workspace cannot show it"
                )

    def seed(self, state: State, seed_files: list[Any]) -> None:
        # Everything is validated before the first byte is written, so a malformed seed leaves the disk alone.
        # Only a write that fails at the OS level (say 'a' and 'a/b' both as files) can leave earlier files of
        # the same seed on disk; the mirror picks them up at the next mutating call.
        planned: list[tuple[str, str, str]] = []
        for where, seed in seed_objects(seed_files, _SEED_KEYS, "'files'"):
            files = seed.get("files", [])
            if not isinstance(files, list):
                raise SeedError(f"{where}: files: expected a list of {{path, content}} objects")
            for pos, entry in enumerate(files):
                at = f"{where}: files[{pos}]"
                if not isinstance(entry, dict):
                    raise SeedError(f"{at}: expected an object with 'path' and 'content'")
                unknown = sorted(set(entry) - _SEED_FILE_KEYS)
                if unknown:
                    raise SeedError(f"{at}: unknown field(s) {unknown}")
                try:
                    path = _lexically_safe(entry.get("path"))
                except ToolError as exc:
                    raise SeedError(f"{at}: path: {exc}") from exc
                content = entry.get("content")
                if not isinstance(content, str):
                    raise SeedError(f"{at}: content: expected a string")
                planned.append((at, path, content))
        if not planned:
            return
        root = self.workspace_root(state)
        for at, path, content in planned:
            try:
                self._write(root, path, content, "path")
            except ToolError as exc:
                raise SeedError(f"{at}: {exc}") from exc
        self.refresh(state)

    # -- tools -----------------------------------------------------------------------------------------

    def handler_subject(self, ctx: ToolContext) -> Path:
        """A file tool works on the workspace's folder, not on its state."""
        return self.workspace_root(ctx.state)

    def call(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        self._refuse_unrecorded(ctx.state, tool_name, params)
        result = super().call(ctx, tool_name, params)
        if self.mutates(tool_name):
            self.refresh(ctx.state)
        return result

    async def acall(self, ctx: ToolContext, tool_name: str, params: dict[str, Any]) -> str:
        """`run_command` waits on a subprocess for up to its timeout: it runs on a worker thread so the event loop
        keeps serving every other workspace, and the state is refreshed after the last await (see base.acall)."""
        if tool_name != "run_command":
            return self.call(ctx, tool_name, params)
        self._refuse_unrecorded(ctx.state, tool_name, params)
        root = self.workspace_root(ctx.state)
        result = await asyncio.to_thread(self._tool_run_command, root, **params)
        self.refresh(ctx.state)
        return result

    @tool(
        name="read_file",
        description=f"Read a text file of the workspace (the first {READ_LIMIT_BYTES // 1024} KiB).",
        parameters=object_schema({"path": string_param("Path relative to the workspace root.")}, ["path"]),
        mutates_state=False,
    )
    def _tool_read_file(self, root: Path, path: str) -> str:
        target = confine(root, path, "path")
        shown = _display(root, target)
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise ToolError(f"Parameter 'path': '{shown}' does not exist") from None
        except OSError as exc:
            raise ToolError(f"Parameter 'path': cannot read '{shown}': {exc.strerror}") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"Parameter 'path': '{shown}' is a directory; use list_dir")
            raise ToolError(_refusal(shown, info))
        with os.fdopen(fd, "rb") as handle:
            head = handle.read(READ_LIMIT_BYTES + 1)
            size = os.fstat(handle.fileno()).st_size
        complete = len(head) <= READ_LIMIT_BYTES
        text = _describe_text(head[:READ_LIMIT_BYTES], complete)
        if text is None:
            return f"'{shown}' is a binary file ({size} bytes); read_file only shows text."
        if not complete:
            text += f"\n[... truncated: showing the first {READ_LIMIT_BYTES} of {size} bytes]"
        return text

    @staticmethod
    def _write(root: Path, path: str, content: str, parameter: str) -> tuple[str, int | None, int]:
        target = confine(root, path, parameter)
        shown = _display(root, target)
        if target == root:
            raise ToolError(f"Parameter '{parameter}': '{path}' is the workspace root, not a file")
        previous: int | None = None
        try:
            info = os.lstat(target)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ToolError(f"Parameter '{parameter}': cannot write '{shown}': {exc.strerror}") from None
        else:
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"Parameter '{parameter}': '{shown}' is a directory")
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                raise ToolError(_refusal(shown, info, parameter))
            previous = info.st_size
        data = content.encode("utf-8")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            # O_NOFOLLOW: the resolved target holds no symlink, and must not have become one since.
            # O_NONBLOCK: a FIFO swapped in meanwhile fails instead of blocking. No O_TRUNC: the file is
            # checked first, truncated after.
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            raise ToolError(f"Parameter '{parameter}': cannot write '{shown}': {exc.strerror}") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            os.close(fd)
            raise ToolError(_refusal(shown, info, parameter))
        with os.fdopen(fd, "wb") as handle:
            handle.truncate(0)
            handle.write(data)
        return shown, previous, len(data)

    @tool(
        name="write_file",
        description="Create or overwrite a file with the given text; missing parent directories are created.",
        parameters=object_schema(
            {
                "path": string_param("Path relative to the workspace root."),
                "content": string_param("The complete new content of the file.", maxLength=MAX_WRITE_CHARS),
            },
            ["path", "content"],
        ),
        mutates_state=True,
    )
    def _tool_write_file(self, root: Path, path: str, content: str) -> str:
        shown, previous, written = self._write(root, path, content, "path")
        if previous is None:
            return f"Wrote {written} bytes to '{shown}' (new file)."
        return f"Wrote {written} bytes to '{shown}' (replaced {previous} bytes)."

    @tool(
        name="list_dir",
        description="List a directory of the workspace: sub-directories end with '/', files show their size.",
        parameters=object_schema(
            {"path": string_param("Directory relative to the workspace root ('.' is the root).", default=".")}, []
        ),
        mutates_state=False,
    )
    def _tool_list_dir(self, root: Path, path: str) -> str:
        target = confine(root, path, "path")
        shown = _display(root, target)
        if not target.exists():
            raise ToolError(f"Parameter 'path': '{shown}' does not exist")
        if not target.is_dir():
            raise ToolError(f"Parameter 'path': '{shown}' is not a directory; use read_file")
        lines: list[str] = []
        names = sorted(os.listdir(target))
        for name in names[:MAX_LISTED_ENTRIES]:
            full = target / name
            try:
                info = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                lines.append(f"{name} -> {os.readlink(full)} (symlink)")
            elif stat.S_ISDIR(info.st_mode):
                lines.append(f"{name}/")
            elif stat.S_ISREG(info.st_mode):
                lines.append(f"{name} ({info.st_size} bytes)")
            else:
                lines.append(f"{name} (special file)")
        if not names:
            return f"'{shown}' is empty."
        header = f"'{shown}' has {len(names)} entr{'y' if len(names) == 1 else 'ies'}:"
        if len(names) > MAX_LISTED_ENTRIES:
            lines.append(f"[... {len(names) - MAX_LISTED_ENTRIES} more not shown]")
        return "\n".join([header, *lines])

    @tool(
        name="run_command",
        description=(
            "Run a shell command (/bin/sh -c) in the workspace root and return its exit code, stdout and stderr. "
            f"It is killed after timeout_seconds (default {DEFAULT_TIMEOUT_SECONDS}, at most {MAX_TIMEOUT_SECONDS}); "
            "background processes do not survive the call."
        ),
        parameters=object_schema(
            {
                "command": string_param("The shell command line."),
                "timeout_seconds": {
                    "type": "number",
                    "description": f"Seconds before the command is killed (at most {MAX_TIMEOUT_SECONDS}).",
                    "exclusiveMinimum": 0,
                    "maximum": MAX_TIMEOUT_SECONDS,
                    "default": DEFAULT_TIMEOUT_SECONDS,
                },
            },
            ["command"],
        ),
        mutates_state=True,
    )
    def _tool_run_command(self, root: Path, command: str, timeout_seconds: float) -> str:
        if not command.strip():
            raise ToolError("Parameter 'command': must not be empty")
        if "\x00" in command:
            raise ToolError("Parameter 'command': contains a NUL byte")
        try:
            returncode, stdout, stderr, timed_out = run_confined_command(root, command, float(timeout_seconds))
        except OSError as exc:
            raise ToolError(f"run_command could not start the command: {exc.strerror}") from None
        if timed_out:
            status = f"timed out after {timeout_seconds:g} s; the command and its process group were killed"
        else:
            status = f"exit code: {returncode}"
        return "\n".join([f"$ {command}", status, "stdout:", stdout.rstrip("\n"), "stderr:", stderr.rstrip("\n")])

    # -- rendering -------------------------------------------------------------------------------------

    def render_text(self, state: State) -> str:
        entries = sorted(state.get("files", {}).values(), key=lambda e: e["path"])
        lines = [f"Workspace files ({len(entries)}):"]
        for entry in entries:
            if entry["type"] == "symlink":
                lines.append(f"  {entry['path']} -> {entry['target']} (symlink)")
                continue
            lines.append(f"  {entry['path']} ({entry['size']} bytes, sha256 {entry['sha256'][:12]})")
            if entry["content"] is not None:
                preview = entry["content"][:2000]
                lines += [f"    | {line}" for line in preview.splitlines()]
                if entry["truncated"] or len(entry["content"]) > len(preview):
                    lines.append("    | [...]")
        return "\n".join(lines)
