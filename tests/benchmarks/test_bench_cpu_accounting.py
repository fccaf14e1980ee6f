"""CPU accounting of the benchmarks: helper processes count whether or not they have been waited for yet."""

from __future__ import annotations

import subprocess
import sys

from benchmarks._common import cpu_seconds, process_tree_cpu_seconds

BURN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
#: The grandchild says when its burn is over (on the stdout it shares with its parent): a fixed wait was too short
#: on a loaded machine.
SAY_BURNT = "print('burnt', flush=True)\n"


def test_a_live_grandchild_that_burnt_cpu_is_counted_and_rusage_alone_misses_it() -> None:
    before_tree, before_own = process_tree_cpu_seconds(), cpu_seconds()
    # A child that starts a grandchild, which burns 0.4 s of CPU and then waits (alive, never reaped) until
    # its parent is told to go: the shape of a verifier worker that stops in the background after a run.
    script = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {BURN + SAY_BURNT + 'import sys; sys.stdin.read()'!r}], "
        "stdin=subprocess.PIPE)\n"
        "print('started', flush=True)\n"
        "sys.stdin.read()\n"
        "child.stdin.close(); child.wait()\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"started\n"
        assert parent.stdout.readline() == b"burnt\n"  # the grandchild's burn is over; it now blocks on stdin
        tree, own = process_tree_cpu_seconds() - before_tree, cpu_seconds() - before_own
    finally:
        assert parent.stdin is not None
        parent.stdin.close()
        parent.wait(timeout=30)
    assert tree >= 0.4  # the burn, in a process two levels down that nobody has waited for
    assert own < 0.3  # this process's own rusage sees none of it
    # Once everything exited and was waited for, the tree's reading keeps it (through RUSAGE_CHILDREN).
    assert process_tree_cpu_seconds() - before_tree >= 0.4
