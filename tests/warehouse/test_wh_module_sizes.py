"""The warehouse stays a place a newcomer can read: each metric family in a module of its own, none over 500
lines, and every metric view registered once, through `metric_view_statements()`."""

from __future__ import annotations

from pathlib import Path

import eval_pipelines.warehouse as warehouse
from eval_pipelines.warehouse.metrics import METRIC_VIEWS, metric_view_statements

MAX_LINES = 500


def test_no_warehouse_module_is_over_500_lines() -> None:
    root = Path(warehouse.__file__).parent
    modules = sorted(root.rglob("*.py"))
    assert root / "metrics" / "__init__.py" in modules
    too_long = {str(p.relative_to(root)): n for p in modules if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert too_long == {}


def test_every_view_is_registered_once() -> None:
    names = [view.name for view in METRIC_VIEWS]
    assert len(names) == len(set(names))
    statements = metric_view_statements()
    assert len(statements) == len(names)
    assert all(f" {name} as" in s for name, s in zip(names, statements, strict=True))
