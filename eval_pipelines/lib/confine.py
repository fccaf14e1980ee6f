"""Confine the calling process before it runs untrusted code (verifiers, model-chosen commands).

- `restrict_writes_to`: Linux Landlock; the process may change the filesystem only beneath the folders it names
  and, from Landlock ABI 6 on, cannot signal processes outside its domain. Reading files stays allowed. No
  privileges are needed, and children inherit it for good. Kernels without Landlock (before 5.13, or with the
  LSM off) get nothing: it then returns False.
- `drop_capabilities`: a process started as root gives up every capability, so it can no longer read the memory
  or `/proc/<pid>/environ` of non-dumpable processes (those holding keys mark themselves so), nor override file
  permissions.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable
from pathlib import Path

_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE = 1 << 1
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = (1 << n for n in range(6, 13))
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1  # ABI 6

#: Every right that changes the filesystem, in Landlock ABI 1.
_WRITE_RIGHTS_V1 = (
    _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK | _MAKE_FIFO
) | (_MAKE_BLOCK | _MAKE_SYM)
#: The rights a rule on a single file (not a folder) may carry.
_FILE_RIGHTS = _WRITE_FILE | _TRUNCATE


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unavailable."""
    libc = _libc()
    if libc is None:
        return 0
    version = int(libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)))
    return max(version, 0)


def restrict_writes_to(folders: Iterable[Path], *, writable_files: Iterable[Path] = ()) -> bool:
    """From now on this process (and its children) may change the filesystem only beneath `folders` (and write to
    `writable_files`, e.g. /dev/null). True when the restriction is in force; False when the kernel has none."""
    libc = _libc()
    abi = abi_version()
    if libc is None or abi < 1:
        return False
    write_rights = _WRITE_RIGHTS_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled_access_fs=write_rights)
    size = 8  # ABI 1-3 know only handled_access_fs; a larger size with unknown fields is refused
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
        size = ctypes.sizeof(_RulesetAttr)
    elif abi >= 4:
        size = 16
    ruleset = int(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)))
    if ruleset < 0:
        return False
    try:
        rules = [(Path(f), write_rights) for f in folders]
        rules += [(Path(f), _FILE_RIGHTS & write_rights) for f in writable_files]
        for path, rights in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)):
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return True


_SYS_CAPSET = 126
_PR_CAPBSET_DROP = 24
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


def drop_capabilities() -> bool:
    """Give up every capability, for good (bounding set first, so no later exec regains one). True when this
    process holds none afterwards; a no-op (True) for a process that had none."""
    libc = _libc()
    if libc is None or os.geteuid() != 0:
        return True
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 40
    for capability in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.syscall(_SYS_CAPSET, ctypes.byref(header), data):
        raise OSError(ctypes.get_errno(), "capset")
    return True


_PR_SET_DUMPABLE = 4


def make_undumpable() -> None:
    """Mark this process non-dumpable: a process of the same user that gave up its capabilities (a verifier, a
    model's command) can then read neither its memory nor its `/proc/<pid>/environ`. For processes that hold
    keys: the sweep, the services, rollout workers and the tool-server host."""
    libc = _libc()
    if libc is not None:
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


#: The environment variables a process that runs untrusted work inherits: locale, time zone and search paths.
#: Everything else stays behind, keys included.
SAFE_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")


def scrubbed_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment reduced to `SAFE_ENVIRONMENT`, plus `extra`."""
    env = {name: os.environ[name] for name in SAFE_ENVIRONMENT if name in os.environ}
    env.update(extra or {})
    return env


def confined_argv(
    argv: list[str], *, writable: Path, memory_bytes: int, cpu_seconds: int, file_bytes: int, sandbox: bool = False
) -> list[str]:
    """`argv` run through this module's launcher, which confines the process before it execs `argv`: writes only
    beneath `writable`, no capabilities, and the given address-space, CPU-time and file-size limits. With
    `sandbox`, it first moves into the namespaces of `lib/sandbox.py` (seeing only `writable` and the system's
    programs, no network), and fails (exit 126) rather than run the command without them."""
    return [
        sys.executable,
        "-I",  # isolated: the command's environment cannot steer which code this launcher runs
        "-m",
        "eval_pipelines.lib.confine",
        "--writable",
        str(writable),
        "--memory-bytes",
        str(memory_bytes),
        "--cpu-seconds",
        str(cpu_seconds),
        "--file-bytes",
        str(file_bytes),
        *(["--sandbox"] if sandbox else []),
        "--",
        *argv,
    ]


def _launch(args: list[str]) -> int:
    """The launcher: apply the limits and the confinement, then become the command (exec, same pid)."""
    import argparse
    import resource
    import signal

    parser = argparse.ArgumentParser(prog="eval_pipelines.lib.confine")
    parser.add_argument("--writable", required=True)
    parser.add_argument("--memory-bytes", type=int, required=True)
    parser.add_argument("--cpu-seconds", type=int, required=True)
    parser.add_argument("--file-bytes", type=int, required=True)
    parser.add_argument("--sandbox", action="store_true")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    options = parser.parse_args(args)
    argv = options.argv[1:] if options.argv[:1] == ["--"] else options.argv
    for limit, value in (
        (resource.RLIMIT_AS, options.memory_bytes),
        (resource.RLIMIT_CPU, options.cpu_seconds),
        (resource.RLIMIT_FSIZE, options.file_bytes),
    ):
        resource.setrlimit(limit, (value, value))
    writable = [Path(options.writable)]
    if options.sandbox:
        from eval_pipelines.lib import sandbox

        try:
            sandbox.isolate(Path(options.writable), tmp_bytes=options.file_bytes)
        except OSError as exc:
            print(f"sandbox: {exc}", file=sys.stderr)
            return 126
        writable += [Path("/tmp"), Path("/dev/shm")]  # the sandbox's own, emptied with it
    restrict_writes_to(writable, writable_files=[Path(os.devnull)])
    drop_capabilities()
    # Python ignores SIGPIPE; a command must not inherit that (`yes | head` would never end).
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if options.sandbox:
        # The init has nothing to flush or clean up, and an interpreter's orderly shutdown costs milliseconds.
        os._exit(sandbox.run_as_init(argv))
    os.execvp(argv[0], argv)
    return 127  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(_launch(sys.argv[1:]))
