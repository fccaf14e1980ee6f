"""A progress bar for long CLI work: description, bar, done/total, elapsed time and ETA, on stderr.

Dagster-free and safe to update from another thread (a poller counting finished rollouts, say). Disabled, it
does nothing, so library code can take one optionally and callers decide whether anything is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

T = TypeVar("T")


class ProgressReporter:
    def __init__(
        self,
        total: int | None,
        description: str = "",
        *,
        console: Console | None = None,
        enabled: bool = True,
        transient: bool = False,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._enabled = enabled
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
            transient=transient,
            disable=not enabled,
            get_time=clock,
        )
        self._task: TaskID = self._progress.add_task(description, total=total)

    def __enter__(self) -> ProgressReporter:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._progress.stop()

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def completed(self) -> float:
        return self._progress.tasks[0].completed

    @property
    def total(self) -> float | None:
        return self._progress.tasks[0].total

    def advance(self, steps: int = 1, *, description: str | None = None) -> None:
        if description is not None:
            self._progress.update(self._task, description=description)
        self._progress.advance(self._task, steps)

    def update(
        self, *, completed: float | None = None, total: int | None = None, description: str | None = None
    ) -> None:
        """Set absolute values: for a poller that recounts what is done rather than counting steps."""
        self._progress.update(self._task, completed=completed, total=total, description=description)

    def track(self, items: Iterable[T], *, describe: str | None = None) -> Iterator[T]:
        """Yield the items, advancing by one after each (the step is done when the caller asks for the next)."""
        for item in items:
            if describe is not None:
                self._progress.update(self._task, description=describe.format(item=item))
            yield item
            self.advance()
