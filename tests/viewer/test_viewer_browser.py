"""The viewer in a real browser: headless Debian `chromium` driven by Playwright (never a browser Playwright
downloads), clicking through the pages as a person would."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.export.conftest import BROKEN
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
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()


def _nothing_ran(page: Page) -> None:
    """The hostile model's markup sets window.pwned if any of it ever runs."""
    assert page.evaluate("typeof window.pwned") == "undefined"


def test_from_the_matrix_to_a_failed_rollout_with_its_calls_diffs_and_verdicts(
    page: Page, viewer: str, viewer_catalog: ViewedCatalog
) -> None:
    page.goto(viewer + "/")
    matrix = page.locator("table.matrix")
    assert "sim-oracle (simulated)" in matrix.inner_text()
    assert HOSTILE in matrix.inner_text()

    page.click("header nav >> text=Rollouts")
    page.select_option("select[name=model]", HOSTILE)
    page.select_option("select[name=outcome]", "failed")
    page.click("form.filters button[type=submit]")
    assert "model=hostile" in page.url and "outcome=failed" in page.url
    links = page.locator("a.rollout-link")
    assert links.count() >= 1
    assert page.locator("table.rollouts tbody .badge.pass, table.rollouts tbody .badge.error").count() == 0
    assert page.locator("table.rollouts tbody .badge.fail").count() == links.count()

    links.first.click()
    rollout_id = page.url.rsplit("/", 1)[-1]
    assert page.locator("h1 .permalink").inner_text() == rollout_id
    requests = page.locator(".call-request")
    assert requests.count() == 2
    assert "email__send_email" in requests.nth(1).inner_text()
    # The send's state diff sits with that call, and opens to show the mail it added.
    call_diff = page.locator(".call-result .diff").first
    assert call_diff.is_visible() and "send_email" in call_diff.inner_text()
    call_diff.locator("summary").click()
    assert "aisha.okafor@example.com" in call_diff.locator("pre.after").inner_text()
    message = viewer_catalog.rows("select message from verifications_latest where rollout_id = ?", [rollout_id])
    verdicts = page.locator("#verdicts table").first.inner_text()
    assert message and str(message[0]["message"]) in verdicts
    # The model's markup is shown as text, and never ran.
    assert "<script>window.pwned = 1</script>" in page.locator("#transcript").inner_text()
    _nothing_ran(page)


def test_an_errored_rollout_shows_its_error_class(page: Page, viewer: str) -> None:
    page.goto(viewer + "/rollouts")
    page.select_option("select[name=model]", BROKEN)
    page.select_option("select[name=outcome]", "error")
    page.click("form.filters button[type=submit]")
    assert page.locator("table.rollouts tbody .badge.error").first.inner_text() == "error: model_endpoint"
    page.locator("a.rollout-link").first.click()
    assert page.locator("#error-class").inner_text() == "model_endpoint"
    assert "left out of every pass rate" in page.locator("#error").inner_text()
    assert "(simulated)" not in page.locator("#model-label").inner_text()


def test_a_simulated_model_is_labelled_simulated_on_every_page(page: Page, viewer: str) -> None:
    page.goto(viewer + "/")
    page.locator("table.matrix th", has_text=f"{JUDGED_MODEL} (simulated)").locator("a").click()
    assert f"model={JUDGED_MODEL}" in page.url
    assert page.locator("table.rollouts tbody tr").first.locator("td").nth(1).inner_text() == (
        f"{JUDGED_MODEL} (simulated)"
    )
    page.locator("a.rollout-link").first.click()
    assert page.locator("#model-label").inner_text() == f"{JUDGED_MODEL} (simulated)"
    assert page.locator(".badge.sim").first.is_visible()
    assert "is a simulated model" in page.locator(".sim-note").inner_text()

    page.locator("a", has_text=BROKEN).last.click()  # "Compare on this task with: broken-endpoint"
    sides = page.locator(".side h2")
    assert sides.all_inner_texts() == [f"{JUDGED_MODEL} (simulated)", BROKEN]
