"""Progress strings that name the step: "Step 3/6: writing instructions (12/40)"."""

from __future__ import annotations

from collections.abc import Callable

STEPS: tuple[str, ...] = (
    "writing the skills document",
    "generating tasks",
    "writing instructions",
    "writing rubrics",
    "generating verifiers",
    "running quality gates",
)
SKILLS, TASKS, INSTRUCTIONS, RUBRICS, VERIFIERS, GATES = range(1, len(STEPS) + 1)


class Progress:
    def __init__(self, report: Callable[[str], None]) -> None:
        self._report = report

    def __call__(self, step: int, done: int | None = None, total: int | None = None) -> None:
        text = f"Step {step}/{len(STEPS)}: {STEPS[step - 1]}"
        if total is not None:
            text += f" ({done or 0}/{total})"
        self._report(text)
