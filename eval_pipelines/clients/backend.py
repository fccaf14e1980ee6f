"""What the pipeline needs from an evaluation service, over any server speaking spec 000: launch or resume a
run, wait for it, list its rollouts and read their artifacts.

Against the local service a re-launch of the same run_name resumes the existing run (409, then
`POST /runs/{id}/resume`). Against a server without the resume extension, the existing run is waited for as it is.
The embedded default is this backend too, against the local service on a loopback port (local/services.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

from eval_pipelines.clients.errors import (
    Conflict,
    MethodNotAllowed,
    NotFound,
    ServiceConnectionError,
    ServiceUnavailable,
    WaitTimeout,
)
from eval_pipelines.clients.evaluation import EvaluationClientSync
from eval_pipelines.lib.redact import redact_url
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import Rollout, Run, RunLaunchRequest, TerminationReason

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[Rollout], None]
T = TypeVar("T")

#: max_parallel the service assumes when a launch names none (the local service's default).
ASSUMED_PARALLEL = 8
#: Slack on top of the rollouts' own time limits before complete_run gives up waiting.
DEADLINE_SLACK_SECONDS = 120.0


#: How often `complete_run` lists the run's rollouts to report the newly finished ones.
PROGRESS_LIST_SECONDS = 5.0
#: How far before the newest completion seen a progress listing starts: a rollout's completion time is taken
#: just before its write, which may wait for another writer, so one can be recorded after a later one.
LISTING_MARGIN_SECONDS = 5.0
#: Rollouts per page when the client reads a run's rollouts.
PAGE_SIZE = 500
#: A run that has pending rollouts and none running for this long is not being executed (its server restarted,
#: say): it is resumed once per stall.
STALL_SECONDS = 10.0
#: How long a call waits for a service it cannot reach (restarting, redeploying, draining) before it fails: the
#: service keeps the runs it accepted, so the sweep picks them up again rather than failing its step.
SERVICE_OUTAGE_SECONDS = 300.0
#: Between two tries to reach a service that is down (each try is itself the client's retries with backoff).
OUTAGE_POLL_SECONDS = 1.0
#: What a service that is down or draining raises once the client's own retries are spent.
SERVICE_DOWN_ERRORS = (ServiceConnectionError, ServiceUnavailable)


OutageState = Literal["waiting", "recovered", "gave_up"]


@dataclass(frozen=True)
class OutageEvent:
    """A call waiting out an evaluation service it cannot reach: `waiting` after each failed try (`attempt` counts
    them, from 1), `recovered` once the service answers again after `waited` seconds, `gave_up` when the wait ran
    out and the call raises."""

    state: OutageState
    url: str
    attempt: int
    limit_seconds: float
    waited: float


OutageListener = Callable[[OutageEvent], None]

_listeners: list[OutageListener] = []
_listeners_lock = threading.Lock()


@contextmanager
def outage_listener(listener: OutageListener) -> Iterator[None]:
    """Tell `listener` about every outage any `EvaluationBackend` of this process waits out (the sweep's steps
    have backends of their own), for the duration: how a display shows what the log file says, without this
    module knowing the display. It is called on the waiting thread and must not raise or block."""
    with _listeners_lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _listeners_lock:
            _listeners.remove(listener)


def _tell_listeners(event: OutageEvent) -> None:
    with _listeners_lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(event)
        except Exception:  # a display's fault must not fail the call that waits for the service
            logger.debug("outage listener %r failed", listener, exc_info=True)


class EvaluationBackend:
    """The pipeline's view of one evaluation service, through `client` (which it closes).

    `local_artifacts(run_id, rollout_id)`: where the service writes a rollout's artifacts, when this process
    shares its disk (the local service); the collector then reads that file instead of downloading a copy.

    Every call waits out a service that cannot be reached for up to `outage_seconds` (0: fail at once), saying
    so in a warning; `outages` counts the outages waited out."""

    def __init__(
        self,
        client: EvaluationClientSync,
        *,
        poll_interval: float = 2.0,
        local_artifacts: Callable[[str, str], Path] | None = None,
        name: str = "http",
        outage_seconds: float = SERVICE_OUTAGE_SECONDS,
    ) -> None:
        self.client = client
        self.poll_interval = poll_interval
        self.local_artifacts = local_artifacts
        self.name = name
        self.outage_seconds = outage_seconds
        self.outages = 0
        #: seconds spent waiting for the service, over every outage
        self.outage_waited = 0.0

    @property
    def url(self) -> str:
        """The service's address, credentials redacted: the form every message shows."""
        return redact_url(self.client.client.base_url)

    def _through_outage(self, call: Callable[[], T]) -> T:
        """`call()`, tried again while the service cannot be reached, for up to `outage_seconds`."""
        down_since: float | None = None
        attempt = 0
        while True:
            try:
                answer = call()
            except SERVICE_DOWN_ERRORS as exc:
                now = time.monotonic()
                attempt += 1
                if down_since is None:
                    down_since = now
                    if self.outage_seconds > 0:
                        logger.warning(
                            "waiting up to %.0fs for the evaluation service at %s (%s)",
                            self.outage_seconds,
                            self.url,
                            exc,
                        )
                gave_up = now - down_since >= self.outage_seconds
                if self.outage_seconds > 0:
                    state: OutageState = "gave_up" if gave_up else "waiting"
                    _tell_listeners(OutageEvent(state, self.url, attempt, self.outage_seconds, now - down_since))
                if gave_up:
                    raise
                time.sleep(OUTAGE_POLL_SECONDS)
                continue
            if down_since is not None:
                waited = time.monotonic() - down_since
                self.outages += 1
                self.outage_waited += waited
                logger.warning("the evaluation service at %s answers again after %.0fs", self.url, waited)
                _tell_listeners(OutageEvent("recovered", self.url, attempt, self.outage_seconds, waited))
            return answer

    def __repr__(self) -> str:
        return f"EvaluationBackend({self.client.client!r})"

    def close(self) -> None:
        self.client.close()

    def launch_or_resume(self, request: RunLaunchRequest) -> str:
        try:
            return self._through_outage(partial(self.client.launch_run, request)).run_id
        except Conflict as conflict:
            existing = self.find_run(request.run_name) if request.run_name else None
            run_id = existing.run_id if existing is not None else conflict.existing_run_id
            if run_id is None:
                raise
        # A re-launch retries what failed before.
        self._resume(run_id, request.model_config_, retry_failed=True)
        return run_id

    def _resume(self, run_id: str, config: ModelConfig, *, retry_failed: bool) -> None:
        try:
            self._through_outage(partial(self.client.resume_run, run_id, config, retry_failed=retry_failed))
        except (NotFound, MethodNotAllowed):
            self._through_outage(partial(self.client.get_run, run_id))  # it exists (else NotFound): no resume here

    def find_run(self, run_name: str) -> Run | None:
        return self._through_outage(partial(self.client.find_run_by_name, run_name))

    def cancel(self, run_id: str) -> int:
        return self._through_outage(partial(self.client.cancel_run, run_id)).cancelled_rollouts

    def complete_run(
        self,
        run_id: str,
        request: RunLaunchRequest,
        *,
        timeout_seconds: float,
        progress: ProgressCallback | None = None,
    ) -> Run:
        """Wait for the launched run to finish; it is never launched again here.

        A run that stops moving (pending rollouts, none running, for `STALL_SECONDS`) or that finished with
        rollouts a server restart interrupted is resumed, so a restarted service finishes what it had accepted.
        `progress` is called once for each rollout that finishes while this call waits. `timeout_seconds` bounds
        one rollout; the overall deadline allows every wave of `max_parallel` rollouts that much, plus the time
        spent waiting for an unreachable service. A service that comes back is told to resume the run at once: a
        restart interrupted its rollouts, and the keys they need came with the resume.
        """
        # A rollout counts as newly finished when it is terminal with a completion time not seen before this
        # call: that covers rollouts a resume re-queued (they had finished once, as interrupted).
        outages_seen, waited_before = self.outages, self.outage_waited
        run = self._through_outage(partial(self.client.get_run, run_id))
        finished_before = (
            {r.rollout_id: r.completed_at for page in self.rollout_pages(run_id, PAGE_SIZE) for r in page
             if r.status.is_terminal}
            if progress is not None and run.total - run.pending - run.running
            else {}
        )  # fmt: skip
        # Each listing asks only for the rollouts completed since the latest one seen, less a margin for
        # finishes recorded out of order: the run's every rollout each time made a 10,000-rollout run's
        # memory grow with its size. The last listing, once the run is finished, reads the whole run a page
        # at a time, so nothing the margin missed goes unreported.
        newest_seen: str | None = None
        waves = math.ceil(max(run.pending + run.running, 1) / (request.max_parallel or ASSUMED_PARALLEL))
        deadline = time.monotonic() + waves * timeout_seconds + DEADLINE_SLACK_SECONDS
        reported: set[str] = set()
        done_seen = done_listed = -1
        moved_at = listed_at = time.monotonic()
        resumed_interrupted = False
        while True:
            done = run.total - run.pending - run.running
            if done != done_seen or run.running:
                moved_at = time.monotonic()
            done_seen = done
            # Listing the run costs the service a serialisation of every rollout: at most once per interval.
            listing_due = run.is_finished or time.monotonic() - listed_at >= PROGRESS_LIST_SECONDS
            if progress is not None and done != done_listed and listing_due:
                since = None if run.is_finished else _before(newest_seen, LISTING_MARGIN_SECONDS)
                for page in self.rollout_pages(run_id, PAGE_SIZE, completed_after=since):
                    for rollout in page:
                        if not rollout.status.is_terminal or rollout.rollout_id in reported:
                            continue
                        if rollout.completed_at and (newest_seen is None or rollout.completed_at > newest_seen):
                            newest_seen = rollout.completed_at
                        if finished_before.get(rollout.rollout_id, "never") == rollout.completed_at:
                            continue
                        reported.add(rollout.rollout_id)
                        progress(rollout)
                done_listed, listed_at = done, time.monotonic()
            came_back = self.outages != outages_seen
            if came_back:
                outages_seen = self.outages
                resumed_interrupted = False  # this restart may have interrupted rollouts the last resume ran
            if run.is_finished:
                # An interrupted rollout is an error (cancelled): without errors, none needs looking for.
                if resumed_interrupted or not run.errors or not self._interrupted(run_id):
                    return run
                resumed_interrupted = True
                self._resume(run_id, request.model_config_, retry_failed=False)
            elif came_back or time.monotonic() - moved_at > STALL_SECONDS:
                moved_at = time.monotonic()
                self._resume(run_id, request.model_config_, retry_failed=False)
            if time.monotonic() > deadline + self.outage_waited - waited_before:
                raise WaitTimeout(
                    f"run {run_id} did not finish in time ({run.pending} pending, {run.running} running)", last=run
                )
            time.sleep(self.poll_interval)
            run = self._through_outage(partial(self.client.get_run, run_id))

    def _interrupted(self, run_id: str) -> bool:
        """Whether a server restart interrupted some of the run's rollouts (a resume runs them again)."""
        return any(
            r.termination_reason == TerminationReason.SERVER_RESTART.value
            for page in self.rollout_pages(run_id, PAGE_SIZE)
            for r in page
        )

    def list_rollouts(self, run_id: str) -> list[Rollout]:
        return self._through_outage(partial(self.client.list_rollouts, run_id=run_id)).rollouts

    def rollout_pages(
        self, run_id: str, page_size: int, *, completed_after: str | None = None
    ) -> Iterator[list[Rollout]]:
        """The run's rollouts a page at a time, without their status history (nothing here reads it, and it was
        most of a listing's cost); with `completed_after`, those completed at or after it. A server without the
        paging extension answers the whole list at once, which is then cut into pages here; one without the
        filter answers every rollout, which the caller sorts out."""
        offset = 0
        while True:
            answer = self._through_outage(
                partial(
                    self.client.list_rollouts,
                    run_id=run_id,
                    limit=page_size,
                    offset=offset,
                    completed_after=completed_after,
                    status_events=False,
                )
            )
            if len(answer.rollouts) > page_size:  # paging ignored: this is every rollout
                for start in range(0, len(answer.rollouts), page_size):
                    yield answer.rollouts[start : start + page_size]
                return
            if answer.rollouts:
                yield answer.rollouts
            offset += len(answer.rollouts)
            if not answer.rollouts or offset >= answer.total:
                return

    def artifacts_file(self, run_id: str, rollout_id: str) -> Path | None:
        """The file the service wrote the rollout's artifacts to, when it is on this process's disk."""
        if self.local_artifacts is None:
            return None
        path = self.local_artifacts(run_id, rollout_id)
        return path if path.is_file() else None

    def get_artifacts(self, rollout_id: str) -> RunArtifacts | None:
        try:
            return self._through_outage(partial(self.client.get_artifacts, rollout_id)).artifacts
        except NotFound:
            return None


def _before(timestamp: str | None, seconds: float) -> str | None:
    """`timestamp` (ISO 8601 with an offset) moved `seconds` earlier, in the same form. None when there is none
    or it is not in that form (a service we did not write may word its times otherwise): then the whole run is
    listed, as before the filter existed."""
    if timestamp is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return (moment - dt.timedelta(seconds=seconds)).isoformat()
