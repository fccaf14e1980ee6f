"""The home page tells the truth about the newest sweep: a sweep whose files are newer than the catalog (its
`task_totals` were computed before them) is shown with its pass rates, read from a catalog the viewer builds for
itself without writing the project's; and a sweep with no verdict yet says so instead of an empty matrix."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.reports.viewer import queries
from eval_pipelines.reports.viewer.app import create_app
from eval_pipelines.warehouse.catalog import build_catalog
from tests.reports.synthetic_warehouse import T0, Attempt, attempts_with, write_warehouse


def _home(base: str) -> str:
    response = httpx.get(base + "/", timeout=60)
    assert response.status_code == 200
    return response.text


def _matrix(page: str) -> str:
    found = re.search(r'<table class="matrix">(.*?)</table>', page, re.S)
    assert found, "no matrix on the page"
    return found.group(1)


@pytest.fixture(autouse=True)
def _look_at_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    # The viewer looks at the warehouse at most once a second; a test's requests come faster.
    monkeypatch.setattr(queries, "WAREHOUSE_CHECK_SECONDS", 0.0)


def test_a_sweep_newer_than_the_catalog_shows_with_its_rates(tmp_path: Path) -> None:
    root = tmp_path / "data" / "warehouse"
    write_warehouse(root, attempts_with({"t-1": (2, 1)}, sweep_id="old-sweep"))
    db = build_catalog(root, tmp_path / "data" / "eval.duckdb").path
    built = db.stat()
    with BackgroundServer(create_app(db)) as server:
        page = _home(server.url)
        assert '<span class="ident">old-sweep</span>' in page and 'id="catalog-note"' not in page

        # A newer sweep's files land in the warehouse; nothing rebuilds the catalog.
        newer = attempts_with(
            {"t-1": (4, 3)}, model_name="model-b", sweep_id="new-sweep", created_at=T0 + timedelta(days=1)
        )
        write_warehouse(root, newer)
        page = _home(server.url)
        assert '<h1>Sweep <span class="ident">new-sweep</span></h1>' in page
        matrix = _matrix(page)
        assert "model-b" in matrix and "0.750" in matrix and "model-a" not in matrix
        note = re.search(r'<p class="note" id="catalog-note">(.*?)</p>', page, re.S)
        assert note and f"{db} was built at" in note.group(1) and "your file is left as it is" in note.group(1)
        # The project's catalog is not written by the viewer.
        assert (db.stat().st_ino, db.stat().st_mtime_ns) == (built.st_ino, built.st_mtime_ns)

        # Once the project's catalog is rebuilt after those files, the viewer reads it again, and says nothing.
        build_catalog(root, db)
        page = _home(server.url)
        assert "0.750" in _matrix(page) and 'id="catalog-note"' not in page


def test_a_sweep_without_a_verdict_says_why_it_has_no_rates(tmp_path: Path) -> None:
    root = tmp_path / "warehouse"
    mixed = [*attempts_with({"t-1": (2, 1)}, sweep_id="mixed"), Attempt("t-2", "unscored", sweep_id="mixed")]
    write_warehouse(root, mixed)
    running = [Attempt(f"t-{i}", "unscored", sweep_id="running", created_at=T0 + timedelta(hours=1)) for i in (1, 2)]
    write_warehouse(root, running)
    db = build_catalog(root, tmp_path / "eval.duckdb").path
    with BackgroundServer(create_app(db)) as server:
        page = _home(server.url)
        partly = httpx.get(server.url + "/", params={"sweep": "mixed"}, timeout=60).text
    # A sweep partly verified: its cell says how many rollouts wait for a verdict, and links them.
    cell = _matrix(partly)
    assert "n 2 · 1 passed" in cell and "1 not verified yet" in cell and "outcome=unscored" in cell
    assert 'id="no-rates"' not in partly
    assert '<span class="ident">running</span>' in page and '<table class="matrix">' not in page
    note = re.search(r'<p class="note" id="no-rates">(.*?)</p>', page, re.S)
    assert note, "an empty matrix, or nothing, where the page should say why there is no rate"
    text = re.sub(r"<[^>]+>", "", note.group(1))
    assert "none of its 2 rollouts has a verdict" in text and "2 not verified yet" in text
    assert 'href="/rollouts?sweep=running&amp;outcome=unscored"' in note.group(1)
    # The sweeps table still lists both sweeps.
    assert page.count('<a href="/?sweep=') == 2
