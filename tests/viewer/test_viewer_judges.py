"""The viewer's judge calibration: the sweep page links it and counts the flagged judges, `/judges` lists every
judge with its rates and each disagreeing rollout linked to its page, and a rollout's page flags the judge beside
its score."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from eval_pipelines.reports.viewer.app import create_app
from tests.warehouse.calibration_warehouse import (
    EMAIL,
    QUALITY,
    QUALITY_WRONG,
    RUBRIC_WRONG,
    SWEEP,
    build_calibration_catalog,
    rollout_id,
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db, _ = build_calibration_catalog(tmp_path_factory.mktemp("viewer-judges"))
    with TestClient(create_app(db)) as client:
        yield client


def _section(page: str, anchor_prefix: str) -> str:
    found = re.search(rf'<section id="({anchor_prefix}[^"]*)">(.*?)</section>', page, re.S)
    assert found, anchor_prefix
    return found.group(2)


def test_the_sweep_page_links_the_calibration_and_counts_flags(client: TestClient) -> None:
    page = client.get("/", params={"sweep": SWEEP}).text
    # Flagged: the quality judge in email_ops (kappa below 0.6) and all three judges in calendar (kappa undefined).
    assert f'href="/judges?sweep={SWEEP}"' in page and "4 flagged" in page


def test_judges_page_links_every_disagreeing_rollout(client: TestClient) -> None:
    response = client.get("/judges", params={"sweep": SWEEP})
    assert response.status_code == 200
    page = response.text
    rows = re.findall(
        r"<tr( class=\"[^\"]*judge-flagged\")?>\s*<td class=\"text\">([^<]+)</td><td class=\"text\">(\w+)</td>", page
    )
    flagged = {(scenario, kind) for mark, scenario, kind in rows if mark}
    assert (EMAIL, "quality") in flagged and (EMAIL, "safety") not in flagged and (EMAIL, "rubric") not in flagged
    assert "flagged: kappa 0." in page and "flagged: kappa undefined" in page
    quality = _section(page, f"judge-{re.escape(EMAIL.replace(':', '_').replace('.', '_'))}-quality")
    linked = set(re.findall(r'<a href="/rollouts/([^"]+)">', quality))
    assert linked == {rollout_id(model, EMAIL, i) for model, i in QUALITY_WRONG}
    assert QUALITY[0] in quality
    rubric = _section(page, f"judge-{re.escape(EMAIL.replace(':', '_').replace('.', '_'))}-rubric")
    assert set(re.findall(r'<a href="/rollouts/([^"]+)">', rubric)) == {
        rollout_id(model, EMAIL, i) for model, i in RUBRIC_WRONG
    }
    # One click: a listed rollout opens its page.
    model, index = sorted(QUALITY_WRONG)[0]
    assert client.get(f"/rollouts/{rollout_id(model, EMAIL, index)}").status_code == 200


def test_a_flagged_judge_is_marked_beside_its_score(client: TestClient) -> None:
    model, index = sorted(QUALITY_WRONG)[0]
    page = client.get(f"/rollouts/{rollout_id(model, EMAIL, index)}").text
    judgements = page[page.index('id="judgements"') :]
    quality_row = next(row for row in judgements.split("<tr>") if QUALITY[0] in row)
    assert 'class="judge-flag"' in quality_row and "flagged: kappa" in quality_row
    safety_row = next(row for row in judgements.split("<tr>") if "guard-safety" in row)
    assert 'class="judge-flag"' not in safety_row and ">ok<" in safety_row


def test_a_sweep_without_judges_says_so(tmp_path: Path) -> None:
    from tests.reports.synthetic_warehouse import attempts_with, build

    db = build(tmp_path, attempts_with({"t0": (2, 1)}, sweep_id="plain"))
    with TestClient(create_app(db)) as client:
        assert "Judges graded against the verifiers" not in client.get("/").text
        assert "nothing to calibrate" in client.get("/judges").text
