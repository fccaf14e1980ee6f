"""Errors of task generation: a request the engine cannot honour, and a job that produced nothing usable."""

from __future__ import annotations


class TaskGenRequestError(ValueError):
    """A request field is out of range or unknown; `field` names it (`num_tasks`, `preset`, `diversity.vary`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class TaskGenFailed(Exception):
    """The job cannot produce a usable result; the message is meant for the caller (it becomes the job's
    `error`), so it names the reason and never carries secrets."""
