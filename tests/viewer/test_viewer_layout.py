"""The viewer at 1280 px in headless Debian `chromium` (Playwright): the page never scrolls sideways, however wide a
table (a wide one scrolls in its own box), the compare page's tables have header rows and each verdict's message
reads as a line of text, and the home page shows a sweep newer than the catalog with its rates."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.reports.viewer import queries
from eval_pipelines.reports.viewer.app import create_app
from eval_pipelines.warehouse.catalog import build_catalog
from tests.export.conftest import BROKEN
from tests.reports.synthetic_warehouse import T0, attempts_with, write_warehouse
from tests.viewer.conftest import HOSTILE, JUDGED_MODEL, ViewedCatalog

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Debian `chromium` is not installed (`apt-get install -y chromium`); CI installs it"
    ),
]
WIDTH = 1280


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is a dev dependency: pip install -e .[dev]"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


def _fits_the_window(page: Page) -> None:
    """Nothing makes the page wider than the window (its own scroll width is the viewport's)."""
    scroll_width, client_width = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert client_width <= WIDTH and scroll_width <= client_width, (scroll_width, client_width)


def test_home_at_1280(page: Page, viewer: str) -> None:
    page.goto(viewer + "/")
    matrix = page.locator("table.matrix")
    assert matrix.is_visible() and matrix.locator("thead th").count() >= 3
    assert "sim-oracle (simulated)" in matrix.inner_text()
    _fits_the_window(page)


def test_a_rollout_page_at_1280(page: Page, viewer: str, viewer_catalog: ViewedCatalog) -> None:
    # The hostile model's rollout: markup as text, a long state diff, verdicts with messages.
    rollout_id = viewer_catalog.rollout_id("s.model_name = ?", [HOSTILE])
    page.goto(f"{viewer}/rollouts/{rollout_id}")
    assert page.locator("h1 .permalink").inner_text() == rollout_id
    assert page.locator("table").count() >= 2
    _fits_the_window(page)


def test_the_compare_page_at_1280(page: Page, viewer: str) -> None:
    page.goto(f"{viewer}/compare?task=email_ops_001&models={JUDGED_MODEL},{BROKEN}")
    assert page.locator(".side").count() == 2
    # Every table of both sides has a header row.
    for table in page.locator(".side table").all():
        assert table.locator("thead th").count() >= 3, table.inner_html()[:300]
    assert page.locator(".side table.picks thead").first.inner_text().split() == [
        "attempt", "rollout", "(opens", "it", "on", "this", "side)", "outcome",
    ]  # fmt: skip
    messages = page.locator("table.verdicts tr.verdict-message td.message")
    assert messages.count() >= 1
    for index in range(messages.count()):
        message = messages.nth(index)
        text = message.inner_text()
        box = message.bounding_box()
        assert box is not None and text.strip()
        line_height = page.evaluate("e => parseFloat(getComputedStyle(e).lineHeight)", message.element_handle())
        # A message of several words reads as text: far fewer lines than words, the cell as wide as the table.
        assert box["height"] / line_height <= max(2, len(text.split()) / 4), (text, box)
        assert box["width"] >= 250, box
    _fits_the_window(page)


def test_home_shows_a_sweep_newer_than_the_catalog_at_1280(
    page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queries, "WAREHOUSE_CHECK_SECONDS", 0.0)
    root = tmp_path / "data" / "warehouse"
    write_warehouse(root, attempts_with({"t-1": (2, 1)}, sweep_id="old-sweep"))
    db = build_catalog(root, tmp_path / "data" / "eval.duckdb").path
    with BackgroundServer(create_app(db)) as server:
        page.goto(server.url + "/")
        assert page.locator("h1 .ident").inner_text() == "old-sweep"
        # The newer sweep ran 3 models on 8 scenarios: a matrix wider than the window.
        newer = []
        for scenario in range(8):
            for model in ("model-a", "model-b", "model-c"):
                newer += attempts_with(
                    {"t-1": (4, scenario % 5)}, model_name=model, scenario_id=f"scenario-{scenario}:1.0.0",
                    sweep_id="new-sweep", created_at=T0 + timedelta(days=1),
                )  # fmt: skip
        write_warehouse(root, newer)
        page.goto(server.url + "/")
        assert page.locator("h1 .ident").inner_text() == "new-sweep"
        assert page.locator("#catalog-note").is_visible()
        matrix = page.locator("table.matrix")
        assert matrix.locator("tbody tr").count() == 3 and matrix.locator("thead th").count() == 10
        assert "0.750" in matrix.inner_text()
        # The matrix scrolls in its own box; the page does not.
        inner, shown = page.evaluate("e => [e.scrollWidth, e.clientWidth]", matrix.element_handle())
        assert inner > shown
        _fits_the_window(page)
