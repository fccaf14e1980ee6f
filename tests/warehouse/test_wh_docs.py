from __future__ import annotations

from pathlib import Path

from eval_pipelines.warehouse.docs import render_data_dictionary
from eval_pipelines.warehouse.metrics import METRIC_VIEWS
from eval_pipelines.warehouse.tables import TABLE_SPECS

DOC = Path(__file__).resolve().parents[2] / "docs" / "warehouse.md"


def test_committed_data_dictionary_is_up_to_date() -> None:
    assert DOC.read_text(encoding="utf-8") == render_data_dictionary(), (
        "docs/warehouse.md is stale: run `.venv/bin/python -m eval_pipelines.warehouse.docs > docs/warehouse.md`"
    )


def test_every_table_column_and_view_is_documented() -> None:
    text = render_data_dictionary()
    for spec in TABLE_SPECS.values():
        assert f"### `{spec.name}`" in text
        assert all(column.doc.strip() for column in spec.columns), spec.name
    for view in METRIC_VIEWS:
        assert f"### `{view.name}`" in text and view.doc.strip()
