"""The viewer's `/parity` page lists the `parity` view of the shown sweep, disagreements first, linked to the
rollouts; the home page links it only for a sweep that ran benchmark tasks."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from eval_pipelines.benchmarks.parity import ParityItem, UpstreamVerdict, run_parity
from eval_pipelines.reports.viewer.app import create_app
from eval_pipelines.warehouse.catalog import build_catalog
from tests.support.benchmark_warehouse import SyntheticRollout, task, write_sweep

SCENARIO = "bfcl_multi_turn_base:2026.3.23"
MARKUP = "<script>window.pwned = 1</script>"


class Worker:
    async def close(self) -> None:
        return None


class Adapter:
    benchmark = "bfcl"
    upstream_version = "2026.3.23"
    judged_components: frozenset[str] = frozenset()

    async def start_worker(self) -> Worker:
        return Worker()

    async def upstream_verdicts(self, worker: Any, items: Sequence[ParityItem]) -> list[UpstreamVerdict]:
        # Upstream fails r-b, which we passed; the message is the grader's text, shown escaped.
        passes = {"r-a": True, "r-b": False, "r-c": False}
        return [
            UpstreamVerdict(i.rollout_id, passes[i.rollout_id], float(passes[i.rollout_id]), message=MARKUP)
            for i in items
        ]


def _catalog(tmp_path: Path) -> Path:
    rollouts = [
        SyntheticRollout("r-a", SCENARIO, "multi_turn_base_0", "passed"),
        SyntheticRollout("r-b", SCENARIO, "multi_turn_base_1", "passed"),
        SyntheticRollout("r-c", SCENARIO, "multi_turn_base_2", "failed"),
        SyntheticRollout("plain", "email:v1", "t1", "passed", sweep_id="sweep-plain"),
    ]
    root = tmp_path / "warehouse"
    write_sweep(root, rollouts, benchmark_of={SCENARIO: "bfcl", "email:v1": None}, traces_dir=tmp_path / "traces")
    asyncio.run(
        run_parity(
            root,
            "sweep-bench",
            task_of=lambda scenario_id, task_id: task(task_id, "bfcl"),
            adapters={"bfcl": Adapter()},
            graded_at=dt.datetime(2026, 3, 2, tzinfo=dt.UTC),
        )
    )
    return build_catalog(root, tmp_path / "eval.duckdb").path


def test_parity_page_lists_disagreements_first_linked_to_rollouts(tmp_path: Path) -> None:
    client = TestClient(create_app(_catalog(tmp_path)))
    page = client.get("/parity", params={"sweep": "sweep-bench"})
    assert page.status_code == 200
    html = page.text
    assert html.index('href="/rollouts/r-b"') < html.index('href="/rollouts/r-a"')
    assert html.index('href="/rollouts/r-b"') < html.index('href="/rollouts/r-c"')
    assert 'class="disagree deterministic"' in html and html.count('class="disagree') == 1
    assert MARKUP not in html and "&lt;script&gt;" in html
    # A sweep with no grading says how to make one.
    empty = client.get("/parity", params={"sweep": "sweep-plain"}).text
    assert "eval-pipelines parity --sweep sweep-plain" in empty


def test_home_links_parity_only_for_a_sweep_with_benchmark_rollouts(tmp_path: Path) -> None:
    client = TestClient(create_app(_catalog(tmp_path)))
    assert 'href="/parity?sweep=sweep-bench"' in client.get("/", params={"sweep": "sweep-bench"}).text
    assert "/parity" not in client.get("/", params={"sweep": "sweep-plain"}).text
