"""The viewer's compare page heads the side-by-side rollouts with the two models' paired comparison over the
scenario: the difference beside the smallest this sweep can see, McNemar's p and the epochs 10 points need."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from eval_pipelines.reports.viewer.app import create_app
from eval_pipelines.reports.viewer.queries import ViewerCatalog
from tests.reports.synthetic_warehouse import attempts_with, build


def test_compare_page_shows_the_paired_comparison(tmp_path: Path) -> None:
    attempts = attempts_with({"t1": (3, 3), "t2": (3, 2), "t3": (3, 0)}, model_name="model-a")
    attempts += attempts_with({"t1": (3, 1), "t2": (3, 1), "t3": (3, 0)}, model_name="model-b")
    catalog = ViewerCatalog(build(tmp_path, attempts))
    comparison = catalog.snapshot().compare(None, "t1", None, ["model-a", "model-b"], [None, None])
    assert comparison.stats
    stats = comparison.stats
    # a passes 3+2+0 of 9 paired epochs, b 1+1+0; a-only / b-only epochs by hand: t1 2/0, t2 1/0 (passes first).
    assert (stats["model_a"], stats["model_b"], stats["n_tasks"], stats["n_pairs"]) == ("model-a", "model-b", 3, 9)
    assert (stats["a_only_passes"], stats["b_only_passes"]) == (3, 0)
    assert stats["verdict"].startswith("diff +33.3 pts")
    page = TestClient(create_app(catalog)).get("/compare", params={"task": "t1", "models": "model-a,model-b"}).text
    assert "paired by task and epoch" in page and "McNemar p" in page and stats["verdict"] in page
