"""Linux namespaces around an untrusted command: it sees its workspace and the system's programs, nothing else.

`isolate` is called by the launcher in `lib/confine.py` before it runs the command. It needs no daemon and no
extra package, only the kernel's namespaces (a user namespace too when the caller is not root):

- mount namespace with a fresh root: `/usr`, `/bin`, `/sbin`, `/lib*` and `/etc` bound read-only (with the
  password hashes and host keys of `/etc` hidden), the workspace read-write at the same path as on the host,
  a fresh, size-capped `/tmp` and `/dev/shm`, a `/dev` of null, zero, full, random, urandom and tty only, and a
  `/proc` of the new PID namespace. Home directories, the project, the host's `/tmp`, `/run`, `/var`, `/opt`,
  `/sys` and every other file of the host are not there.
- PID namespace: the command's shell is pid 2 under a small init (this launcher) that exits with it; `ps` and
  `/proc` show only the command's own processes, and when the shell exits every process left behind is killed
  by the kernel, including those that escaped with `setsid`.
- network namespace with only a loopback interface: no route to the host's loopback services or beyond.
- IPC namespace: no System V shared memory or semaphores of the host.

The parent of the init stays outside, in the caller's session, and relays the command's exit status.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import struct
import sys
from pathlib import Path

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000

_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MNT_DETACH = 2

_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 1, 2, 4
_SYS_MOUNT_SETATTR = 442  # the same number on every architecture (added after the syscall tables were unified)
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

_PR_SET_PDEATHSIG = 1
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_AF_INET, _SOCK_DGRAM = 2, 2

#: Host directories the command sees, read-only: programs, libraries and their configuration.
SYSTEM_DIRECTORIES = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
#: Parts of /etc that hold credentials rather than configuration: covered by an empty directory or /dev/null (which
#: the nodev mount of /etc then refuses to open).
HIDDEN_ETC_PATHS = (
    "etc/shadow",
    "etc/shadow-",
    "etc/gshadow",
    "etc/gshadow-",
    "etc/ssh",
    "etc/ssl/private",
    "etc/sudoers",
    "etc/sudoers.d",
)
#: Device nodes the command may open; everything else under /dev (disks, consoles, /dev/kmsg) is absent.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
#: The kernel's settings under /proc, read-only (as bubblewrap does), though Landlock and the dropped capabilities
#: already keep a command from writing them.
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
#: Where the new root is assembled: a mount point covered in the new mount namespace only.
_STAGING = "/tmp"


class SandboxError(OSError):
    """The kernel refused a step of building the sandbox."""


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise SandboxError(errno, f"{what}: {os.strerror(errno)}")


def _c(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    assert _libc is not None
    _check(_libc.mount(_c(source), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(data)), f"mount {target}")


def _read_only(target: str) -> None:
    """`target` and every mount beneath it read-only, no set-uid, no device files."""
    assert _libc is not None
    attr = _MountAttr(attr_set=_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV)
    done = _libc.syscall(
        _SYS_MOUNT_SETATTR, _AT_FDCWD, _c(target), _AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)
    )
    if done != 0:  # kernels before 5.12: the top mount only (the host rarely mounts anything beneath these)
        _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def _pivot_root(new_root: str, put_old: str) -> None:
    assert _libc is not None
    machine = os.uname().machine
    number = _SYS_PIVOT_ROOT.get(machine)
    if number is None:
        raise SandboxError(0, f"pivot_root: unknown syscall number on {machine}")
    _check(_libc.syscall(number, _c(new_root), _c(put_old)), "pivot_root")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


def _unshare() -> None:
    """New mount, PID, network and IPC namespaces; through a user namespace when root's are out of reach."""
    assert _libc is not None
    flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC
    if os.geteuid() == 0 and _libc.unshare(flags) == 0:
        return
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(flags | _CLONE_NEWUSER), "unshare")
    # Root inside, the caller outside: files the command creates belong to the caller.
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")


def _bring_up_loopback() -> None:
    # A socket from libc rather than the socket module: importing that costs more than the whole ioctl.
    assert _libc is not None
    fd = int(_libc.socket(_AF_INET, _SOCK_DGRAM, 0))
    if fd < 0:
        _check(fd, "socket")
    try:
        flags = struct.unpack("16sh14x", fcntl.ioctl(fd, _SIOCGIFFLAGS, struct.pack("16sh14x", b"lo", 0)))[1]
        fcntl.ioctl(fd, _SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | _IFF_UP))
    finally:
        os.close(fd)


def _bind_system(new: str) -> None:
    """The system directories under `new`, read-only, with the credentials in /etc covered."""
    bound = []
    for name in SYSTEM_DIRECTORIES:
        source, target = f"/{name}", f"{new}/{name}"
        if os.path.islink(source):  # merged /usr: /bin -> usr/bin, and so on
            os.symlink(os.readlink(source), target)
        elif os.path.isdir(source):
            os.mkdir(target)
            _mount(source, target, None, _MS_BIND | _MS_REC)
            bound.append(target)
    for hidden in HIDDEN_ETC_PATHS:
        target = f"{new}/{hidden}"
        if os.path.isdir(target) and not os.path.islink(target):
            _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=4k")
        elif os.path.isfile(target) and not os.path.islink(target):
            _mount("/dev/null", target, None, _MS_BIND)
    for target in bound:
        _read_only(target)


def _make_dev(new: str, tmp_bytes: int) -> None:
    """A read-only `/dev` of the harmless devices, with a writable, size-capped `/dev/shm`."""
    os.mkdir(f"{new}/dev")
    _mount("tmpfs", f"{new}/dev", "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=0755,size=64k")
    for device in DEVICES:
        if os.path.exists(f"/dev/{device}"):
            Path(f"{new}/dev/{device}").touch()
            _mount(f"/dev/{device}", f"{new}/dev/{device}", None, _MS_BIND)
    for number, stream in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{number}", f"{new}/dev/{stream}")
    os.symlink("/proc/self/fd", f"{new}/dev/fd")
    os.mkdir(f"{new}/dev/shm")
    _mount("tmpfs", f"{new}/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode=1777,size={tmp_bytes}")
    _mount(None, f"{new}/dev", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC)


def _make_proc(new: str) -> None:
    """The new PID namespace's `/proc`, with the kernel's settings read-only."""
    os.mkdir(f"{new}/proc")
    _mount("proc", f"{new}/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    for knobs in PROC_READ_ONLY:
        target = f"{new}/proc/{knobs}"
        if os.path.exists(target):
            _mount(target, target, None, _MS_BIND | _MS_REC)
            _read_only(target)


def _build_root(workspace: str, tmp_bytes: int) -> None:
    """Assemble the new root under `_STAGING` and make it `/`; the working directory ends in `workspace`."""
    assert _libc is not None
    # The workspace usually lives under the host's /tmp, which the staging mount is about to cover.
    workspace_fd = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing done here propagates back to the host
    new = _STAGING
    _mount("tmpfs", new, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
    _bind_system(new)
    _make_dev(new, tmp_bytes)
    os.mkdir(f"{new}/tmp")
    _mount("tmpfs", f"{new}/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode=1777,size={tmp_bytes}")
    os.makedirs(f"{new}{workspace}", exist_ok=True)
    _mount(f"/proc/self/fd/{workspace_fd}", f"{new}{workspace}", None, _MS_BIND | _MS_REC)
    os.close(workspace_fd)
    _make_proc(new)

    os.chdir(new)
    _pivot_root(".", ".")  # the old root now sits on top of the new one; detaching it leaves only the new
    _check(_libc.umount2(b".", _MNT_DETACH), "umount the host's root")
    os.chdir("/")
    _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    os.chdir(workspace)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # killed by a signal: as a shell reports it


def isolate(workspace: Path, tmp_bytes: int) -> None:
    """Move into new namespaces and a new root holding `workspace`. Returns in the init (pid 1) of the new PID
    namespace; the calling process stays outside, waits for it, and exits with its status (never returns)."""
    if _libc is None:
        raise SandboxError(0, "namespaces need Linux")
    _unshare()
    child = os.fork()
    if child:
        # Outside: the caller's process group holds this process, the init and the command, so a kill of the
        # group (timeout) reaches all three.
        _, status = os.waitpid(child, 0)
        os._exit(_exit_code(status))
    try:
        _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
        _build_root(str(workspace), tmp_bytes)
        _bring_up_loopback()
    except OSError as exc:
        sys.stderr.write(f"sandbox: {exc}\n")
        sys.stderr.flush()
        os._exit(126)


def run_as_init(argv: list[str]) -> int:
    """As pid 1: run `argv` as a child, reap every orphan meanwhile, and return the child's exit status. When
    this returns and the process exits, the kernel kills whatever the command left running."""
    command = os.fork()
    if command == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"{argv[0]}: {exc.strerror}\n")
            sys.stderr.flush()
        os._exit(127)
    while True:
        pid, status = os.wait()
        if pid == command:
            return _exit_code(status)
