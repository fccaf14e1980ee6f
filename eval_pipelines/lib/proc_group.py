"""Hold a process and everything it starts as one group: a cap on how many tasks the group may hold, and a kill
that reaches every member, a detached one (double fork, `setsid`) included.

The parent's side is `ProcessGroup.contain(leader, ...)`. Where this process may create cgroups (root, or a
delegated subtree), the group is a cgroup of its own with `pids.max` set: cgroup v2 when the pids controller is
available there, else the v1 pids hierarchy. Members cannot leave a cgroup without writing to a `cgroup.procs`
file outside it, which Landlock write confinement (`lib/confine.py`) forbids, and `kill` reaches them wherever
they went in the process tree. Elsewhere the group is the leader's process tree: the leader makes itself a child
subreaper (`become_subreaper`), so a detached descendant is re-parented to it rather than to init, and `kill` stops
the leader, kills its tree, then the leader. That form has no count cap of its own: the leader caps its user's
tasks with RLIMIT_NPROC instead (`cap_user_tasks`), which the kernel enforces for every user but real root.

The leader's side: `become_subreaper`, `kill_descendants` (after each piece of untrusted work, so nothing it
started outlives it) and `exit_when_orphaned` (no process lives on after the one that started it).
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import select
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from eval_pipelines.lib.confine import _libc

_PR_SET_CHILD_SUBREAPER = 36
#: How long a kill keeps sweeping for members that a fork in flight added; far above the few milliseconds it takes.
_KILL_DEADLINE_SECONDS = 5.0
_KILL_PASS_PAUSE_SECONDS = 0.005


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- the process tree -----------------------------------------------------------------------------------------


def _process_table() -> dict[int, tuple[int, bool]]:
    """pid -> (parent pid, whether it still runs: not a zombie) for every process this one can see."""
    table: dict[int, tuple[int, bool]] = {}
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as file:
                    stat = file.read()
            except OSError:  # it ended while the table was read
                continue
            # The command name may hold spaces and parentheses: the fields that follow start after its last ')'.
            state, ppid = stat[stat.rfind(b")") + 2 :].split()[:2]
            table[int(entry.name)] = (int(ppid), state not in (b"Z", b"X"))
    return table


def live_descendants(root: int) -> list[int]:
    """Every running (not zombie) process below `root` in the process tree."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            stack.append(child)
            if table[child][1]:
                found.append(child)
    return found


def _kill_until_gone(members: Callable[[], list[int]], after_pass: Callable[[], object] = lambda: None) -> set[int]:
    """SIGKILL whatever `members()` lists until it lists nothing: a member that forked while the previous pass
    signalled it added a process the next pass finds (once a kill is pending, the kernel refuses its forks)."""
    killed: set[int] = set()
    deadline = time.monotonic() + _KILL_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        pids = members()
        if not pids:
            break
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        killed.update(pids)
        after_pass()
        time.sleep(_KILL_PASS_PAUSE_SECONDS)
    return killed


# --- the leader's side ----------------------------------------------------------------------------------------


def become_subreaper() -> bool:
    """Orphans among this process's descendants (a double fork, a `setsid` daemon) are re-parented to this process
    rather than to init, so they stay in its tree. False where the kernel offers no subreapers."""
    libc = _libc()
    return libc is not None and libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _reap_children() -> bool:
    """Collect every child that has exited; whether any child is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def kill_descendants() -> int:
    """Kill every process this one started, directly or not, and collect them; how many were still running. Cheap
    when there are none (one wait call), which is the usual case. A subreaper (`become_subreaper`) finds its
    detached descendants too."""
    if not _reap_children():
        return 0
    me = os.getpid()
    killed = _kill_until_gone(lambda: live_descendants(me), _reap_children)
    _reap_children()
    return len(killed)


def exit_when_orphaned(peer_fd: int) -> None:
    """End this process, and everything it started, as soon as the peer of the stream socket `peer_fd` closes its
    end, which its death does: no traceback, exit status 0.

    Why not PR_SET_PDEATHSIG: the kernel sends it when the *thread* that started this process ends, and a parent
    may start it from a short-lived thread. A hang-up on the socket means the parent process is gone or let go."""

    def watch() -> None:
        poller = select.poll()
        poller.register(peer_fd, select.POLLRDHUP)
        poller.poll()  # no timeout: returns only on a hang-up (or an error) of the socket
        kill_descendants()
        os._exit(0)

    threading.Thread(target=watch, name="exit-when-orphaned", daemon=True).start()


def _in_initial_user_namespace() -> bool:
    try:
        return Path("/proc/self/uid_map").read_text().split() == ["0", "0", "4294967295"]
    except OSError:
        return True


def _tasks_of_user(uid: int) -> int:
    """How many tasks (threads count) the user `uid` runs now: what RLIMIT_NPROC is compared with."""
    total = 0
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = dict(
                    line.split(":", 1) for line in Path(entry.path, "status").read_text().splitlines() if ":" in line
                )
                if int(fields["Uid"].split()[0]) == uid:
                    total += int(fields["Threads"])
    return total


def cap_user_tasks(extra: int) -> bool:
    """Let this process's user start at most `extra` tasks beyond those it runs now (RLIMIT_NPROC), the fallback
    cap where no cgroup could be made. Call it after giving up capabilities. True when the kernel enforces it: it
    never does for real root (uid 0 of the initial user namespace), capabilities or not. The user's other
    processes share the allowance, so it is a bound, not an exact count."""
    limit = _tasks_of_user(os.getuid()) + extra
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    except (ValueError, OSError):
        return False
    return os.getuid() != 0 or not _in_initial_user_namespace()


# --- the parent's side: cgroups -------------------------------------------------------------------------------


def _mounts() -> list[tuple[str, Path, str, set[str]]]:
    """(root within the hierarchy, mount point, filesystem type, super options) of every cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[3], Path(fields[4]), tail[0], set(tail[2].split(","))))
    return found


def _own_cgroups() -> list[tuple[str, Path]]:
    """(filesystem type, folder) of this process's cgroup in each hierarchy that can cap a group's tasks, v2 first."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    mounts = _mounts()
    candidates: list[tuple[str, Path]] = []
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        v2 = hierarchy == "0" and controllers == ""
        if not v2 and "pids" not in controllers.split(","):
            continue
        for root, mount_point, fstype, options in mounts:
            fits = fstype == "cgroup2" if v2 else fstype == "cgroup" and "pids" in options
            if fits and (path == root or path.startswith(root.rstrip("/") + "/")):
                candidates.append((fstype, mount_point / path[len(root) :].lstrip("/")))
                break
    return sorted(candidates, key=lambda candidate: candidate[0] != "cgroup2")


def _prepare_home(fstype: str, own: Path, family: str) -> Path | None:
    """The folder for this family's groups beneath `own`, made ready for pids-capped children; None if it cannot be."""
    home = own / family
    try:
        if fstype == "cgroup2":
            # A v2 folder holds either processes or child groups with controllers: enable pids on the way down.
            if "pids" not in (own / "cgroup.subtree_control").read_text().split():
                (own / "cgroup.subtree_control").write_text("+pids")
            home.mkdir(exist_ok=True)
            if "pids" not in (home / "cgroup.subtree_control").read_text().split():
                (home / "cgroup.subtree_control").write_text("+pids")
        else:
            home.mkdir(exist_ok=True)
    except OSError:
        return None
    return home


@functools.cache
def groups_home(family: str) -> Path | None:
    """Where this process makes the family's cgroups, chosen once (stale groups of ended processes cleared); None
    where it can make none, and groups are process trees."""
    for fstype, own in _own_cgroups():
        home = _prepare_home(fstype, own, family)
        if home is not None:
            _clear_stale_groups(home)
            return home
    return None


def _members(folder: Path) -> list[int]:
    try:
        return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _clear_stale_groups(home: Path) -> None:
    """Kill what is left in the groups of processes that ended without releasing them (a kill -9), and remove
    those groups. A group's name starts with its owner's pid."""
    with contextlib.suppress(OSError):
        for folder in home.iterdir():
            owner = folder.name.split("-", 1)[0]
            if folder.is_dir() and owner.isdigit() and not _alive(int(owner)):
                _kill_until_gone(functools.partial(_members, folder))
                with contextlib.suppress(OSError):
                    folder.rmdir()


class ProcessGroup:
    """A started process (the leader) and everything it starts. `contain` right after starting it, before it runs
    anything untrusted; `kill` on timeout or at the end, then `release` once the leader has been waited for."""

    def __init__(self, leader: int, cgroup: Path | None) -> None:
        self.leader = leader
        #: The group's cgroup folder; None when the group is the leader's process tree (no count cap from here).
        self.cgroup = cgroup

    @classmethod
    def contain(cls, leader: int, *, max_tasks: int, family: str) -> ProcessGroup:
        """Put `leader` into a cgroup of its own (beneath `family`) holding at most `max_tasks` tasks, threads
        included; where none can be made, the group is the leader's process tree."""
        home = groups_home(family)
        if home is None:
            return cls(leader, None)
        folder = home / f"{os.getpid()}-{leader}"
        try:
            folder.mkdir()
            (folder / "pids.max").write_text(str(max_tasks))
            (folder / "cgroup.procs").write_text(str(leader))
        except OSError:
            with contextlib.suppress(OSError):
                folder.rmdir()
            return cls(leader, None)
        return cls(leader, folder)

    @property
    def capped(self) -> bool:
        """Whether the kernel caps the group's tasks (a cgroup); otherwise the leader must cap itself."""
        return self.cgroup is not None

    def kill(self) -> None:
        """SIGKILL every member, the leader included."""
        if self.cgroup is None:
            # A stopped leader neither forks nor reaps, so its tree holds still while it is swept; orphans of
            # killed members are re-parented to it (a subreaper) and found by the next pass.
            _signal(self.leader, signal.SIGSTOP)
            _kill_until_gone(lambda: live_descendants(self.leader))
            _signal(self.leader, signal.SIGKILL)
            return
        with contextlib.suppress(OSError):  # cgroup v2 from Linux 5.14: the kernel kills every member at once
            (self.cgroup / "cgroup.kill").write_text("1")
        _signal(self.leader, signal.SIGKILL)
        for pid in _members(self.cgroup):
            _signal(pid, signal.SIGKILL)

    def release(self) -> None:
        """After the leader was waited for: make sure no member is left and remove the cgroup."""
        if self.cgroup is None:
            return
        cgroup = self.cgroup
        _kill_until_gone(lambda: _members(cgroup))
        with contextlib.suppress(OSError):  # still busy: cleared by the next process that makes groups
            cgroup.rmdir()
