"""Dagster runs that a CLI sweep executes in its own process: their tags, a heartbeat, and the clean-up that
fails them when that process is gone (kill -9), which Dagster's run monitoring does not do for in-process runs.

The clean-up runs at the start of every CLI sweep (any host) and in the `abandoned_cli_runs` sensor (under
the daemon): a run of this host whose process is gone, or of any host whose heartbeat stopped, is failed and
its pool slots are freed.
"""

from __future__ import annotations

import os
import socket
import threading
from datetime import UTC, datetime, timedelta
from types import TracebackType

import dagster as dg

CLI_PID_TAG = "eval_pipelines/cli_pid"
CLI_HOST_TAG = "eval_pipelines/cli_host"
#: Updated every HEARTBEAT_SECONDS while the CLI executes the run (ISO 8601, UTC).
HEARTBEAT_TAG = "eval_pipelines/heartbeat"
HEARTBEAT_SECONDS = 15.0
#: A heartbeat older than this means the process that ran the run is gone (for runs of another host).
STALE_AFTER = timedelta(seconds=120)


class Heartbeat:
    """`with Heartbeat(instance, run_id):` tags the run with the time, now and every HEARTBEAT_SECONDS."""

    def __init__(self, instance: dg.DagsterInstance, run_id: str, every: float = HEARTBEAT_SECONDS) -> None:
        self.instance = instance
        self.run_id = run_id
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="cli-run-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            if self.instance.get_run_by_id(self.run_id) is not None:
                self.instance.add_run_tags(self.run_id, {HEARTBEAT_TAG: datetime.now(UTC).isoformat()})

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()


def _gone(run: dg.DagsterRun, now: datetime) -> str | None:
    """Why the run's CLI process is gone, or None while it may still be running."""
    pid = int(run.tags.get(CLI_PID_TAG, "0") or 0)
    if run.tags.get(CLI_HOST_TAG) == socket.gethostname() and pid > 0:
        try:
            os.kill(pid, 0)
            return None
        except ProcessLookupError:
            return f"the sweep process (pid {pid}) is gone"
        except PermissionError:
            return None  # alive, owned by someone else
    beat = run.tags.get(HEARTBEAT_TAG)
    if beat is None:
        return None
    try:
        last = datetime.fromisoformat(beat)
    except ValueError:
        return None
    if now - last > STALE_AFTER:
        return f"the sweep process on {run.tags.get(CLI_HOST_TAG, 'another host')} stopped its heartbeat at {beat}"
    return None


def fail_abandoned_cli_runs(instance: dg.DagsterInstance) -> int:
    """Fail the CLI runs still STARTED whose process is gone, and free their pool slots. Returns how many."""
    statuses = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING]
    now = datetime.now(UTC)
    failed = 0
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=statuses)):
        if CLI_HOST_TAG not in run.tags:
            continue
        reason = _gone(run, now)
        if reason is None:
            continue
        instance.report_run_failed(run, message=reason)
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        failed += 1
    return failed
