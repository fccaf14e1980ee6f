"""The process's limit on open file descriptors, raised to what its concurrency needs.

Every rollout in flight holds sockets (its model call, its tool server's connection, both ends of the latter
when the tool host is ours) and, now and then, a file: a thousand in flight need a few thousand descriptors,
far above the soft limit of 1,024 many systems start a process with. The soft limit may be raised up to the
hard one without privileges; processes started afterwards (rollout workers, the tool host) inherit it.
"""

from __future__ import annotations

import logging
import resource

logger = logging.getLogger(__name__)

#: Descriptors a process needs besides its rollouts': its interpreter, logs, the run store, pipes to workers.
BASE_OPEN_FILES = 256
#: Descriptors one concurrent rollout may hold: model and tool-server sockets, an artifact being written, a
#: verifier worker's pipes, with room to spare for connections being replaced.
OPEN_FILES_PER_ROLLOUT = 8


def open_files_needed(concurrency: int) -> int:
    """Descriptors a process running `concurrency` rollouts at once should be allowed."""
    return BASE_OPEN_FILES + OPEN_FILES_PER_ROLLOUT * max(concurrency, 0)


def raise_open_files_limit(wanted: int | None) -> int:
    """Raise the soft RLIMIT_NOFILE to `wanted` (None: as high as the hard limit allows), never lowering it and
    never above the hard limit; returns the soft limit in force. A refusal leaves the limit as it was: the run
    still proceeds, and a shortfall then shows as connection errors, which the log line explains."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return soft
    # An unlimited hard limit is still bounded by the kernel's nr_open: ask for what is needed, or 65,536.
    ceiling = hard if hard != resource.RLIM_INFINITY else max(soft, wanted or 0, 1 << 16)
    target = ceiling if wanted is None else min(wanted, ceiling)
    if target <= soft:
        if wanted is not None and wanted > soft:
            logger.warning(
                "open-file limit %d is below the %d this concurrency needs (hard limit %d)", soft, wanted, hard
            )
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        logger.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
        return soft
    if wanted is not None and target < wanted:
        logger.warning(
            "open-file limit raised to %d (the hard limit), below the %d this concurrency needs", target, wanted
        )
    return target
