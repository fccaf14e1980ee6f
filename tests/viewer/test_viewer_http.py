"""The viewer over plain HTTP (httpx against the served app): the matrix, the list's filters and paging against
the catalog's own SQL, 404s, escaping of model output, what a rollout page reads, the comparison, a rebuilt
catalog, and `eval-pipelines view` itself."""

from __future__ import annotations

import html
import os
import re
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from eval_pipelines.cli import EXIT_USER_ERROR, main
from eval_pipelines.lib.serving import BackgroundServer, free_port
from eval_pipelines.reports import model_label
from eval_pipelines.reports.viewer.app import create_app
from eval_pipelines.reports.viewer.queries import ViewerCatalog
from eval_pipelines.warehouse.catalog import build_catalog
from tests.export.conftest import BROKEN, SCRIPTED
from tests.reports.synthetic_warehouse import T0, attempts_with, write_warehouse
from tests.viewer.conftest import EMAIL, HOSTILE, JUDGED_MODEL, NPC_TASK, SWEEP_ID, ViewedCatalog

#: The list's order: model, scenario, task, repeat, id.
LIST_ORDER = "order by s.model_name, s.scenario_id, s.task_id, s.rollout_index, s.rollout_id"


def _get(base: str, path: str, **params: Any) -> httpx.Response:
    return httpx.get(base + path, params=params, timeout=30)


def _ids(page: str) -> list[str]:
    return re.findall(r'class="rollout-link" href="/rollouts/([^"]+)"', page)


def _total(page: str) -> int:
    found = re.search(r'<strong id="total">([\d,]+)</strong>', page)
    assert found, "no total on the page"
    return int(found.group(1).replace(",", ""))


def _listed(base: str, **params: Any) -> tuple[int, list[str]]:
    response = _get(base, "/rollouts", per_page=200, **params)
    assert response.status_code == 200, response.text
    return _total(response.text), _ids(response.text)


def _expected(catalog: ViewedCatalog, where: str) -> list[str]:
    rows = catalog.rows(
        f"select s.rollout_id from rollout_scores as s join rollouts as r using (rollout_id) "
        f"where s.sweep_id = ? and ({where}) {LIST_ORDER}",
        [SWEEP_ID],
    )
    return [str(row["rollout_id"]) for row in rows]


def test_matrix_shows_each_model_x_scenario_with_its_errors(viewer: str, viewer_catalog: ViewedCatalog) -> None:
    response = _get(viewer, "/")
    assert response.status_code == 200
    page = response.text
    groups = viewer_catalog.rows("select * from scenario_model_metrics where sweep_id = ?", [SWEEP_ID])
    assert len(groups) >= 7
    for group in groups:
        assert model_label(group["model_name"], group["is_simulated"]) in page
        assert f"model={group['model_name']}&amp;scenario={group['scenario_id'].replace(':', '%3A')}" in page
    # Every simulated model is labelled so; a real endpoint is not.
    assert "sim-oracle (simulated)" in page and "sim-noisy (simulated)" in page
    assert "broken-endpoint (simulated)" not in page
    broken = next(g for g in groups if g["model_name"] == BROKEN and g["scenario_id"] == EMAIL)
    assert broken["pass_rate"] is None  # every rollout errored: no rate, never 0
    assert f"{broken['n_errors']} errors (100%)" in page
    assert "<code>model_endpoint</code>" in page


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({}, "true"),
        ({"model": JUDGED_MODEL, "outcome": "passed"}, f"s.model_name = '{JUDGED_MODEL}' and s.outcome = 'passed'"),
        ({"outcome": "failed"}, "s.outcome = 'failed'"),
        ({"outcome": "error"}, "s.outcome = 'error'"),
        ({"error_class": "model_endpoint"}, "s.error_class = 'model_endpoint'"),
        ({"error_class": "tool_server"}, "s.error_class = 'tool_server'"),
        ({"scenario": "team_chat:1.0.0", "task": "team_chat_001"}, "s.task_id = 'team_chat_001'"),
        (
            {"flag": "bad_arguments"},
            "exists (select 1 from tool_calls as t "
            "where t.rollout_id = s.rollout_id and t.arguments_error is not null)",
        ),
        (
            {"flag": "malformed"},
            "coalesce(r.final_answer_is_tool_call, false) or exists (select 1 from tool_calls as t "
            "where t.rollout_id = s.rollout_id and t.arguments_error is not null)",
        ),
        ({"flag": "text_tool_call"}, "coalesce(r.final_answer_is_tool_call, false)"),
    ],
)
def test_filters_list_what_the_catalog_says(
    viewer: str, viewer_catalog: ViewedCatalog, params: dict[str, str], where: str
) -> None:
    total, ids = _listed(viewer, **params)
    expected = _expected(viewer_catalog, where)
    assert total == len(expected)
    assert ids == expected


def test_the_malformed_flag_finds_the_arguments_that_were_not_json(viewer: str, viewer_catalog: ViewedCatalog) -> None:
    _, ids = _listed(viewer, flag="bad_arguments")
    assert ids == _expected(viewer_catalog, f"s.model_name = '{SCRIPTED}'")
    page = _get(viewer, f"/rollouts/{ids[0]}").text
    assert "arguments not JSON: not called" in page and "{not json" in page


def test_paging_walks_every_rollout_once_in_order(viewer: str, viewer_catalog: ViewedCatalog) -> None:
    expected = _expected(viewer_catalog, "true")
    seen: list[str] = []
    page_number = 1
    while True:
        response = _get(viewer, "/rollouts", per_page=3, page=page_number)
        assert response.status_code == 200
        seen += _ids(response.text)
        if 'rel="next"' not in response.text:
            break
        page_number += 1
    assert seen == expected
    assert page_number == -(-len(expected) // 3)
    past = _get(viewer, "/rollouts", per_page=3, page=page_number + 5)
    assert past.status_code == 200 and _ids(past.text) == [] and "No rollout matches" in past.text
    # Filters survive paging: the next link keeps them.
    first = _get(viewer, "/rollouts", outcome="error", per_page=1).text
    assert re.search(r'href="/rollouts\?[^"]*outcome=error[^"]*page=2"', first)


@pytest.mark.parametrize(
    "params",
    [
        {"page": "0"},
        {"page": "two"},
        {"per_page": "5000"},
        {"outcome": "bogus"},
        {"flag": "shiny"},
        {"error_class": "gremlins"},
        {"error_class": "model_endpoint", "outcome": "passed"},
    ],
)
def test_bad_filter_or_paging_values_are_400(viewer: str, params: dict[str, str]) -> None:
    response = _get(viewer, "/rollouts", **params)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/html")


def test_unknown_rollout_sweep_task_or_page_is_404(viewer: str) -> None:
    for path, params in (
        ("/rollouts/no-such-rollout", {}),
        ("/rollouts/%3Cscript%3E", {}),
        ("/rollouts", {"sweep": "no-such-sweep"}),
        ("/", {"sweep": "no-such-sweep"}),
        ("/compare", {"task": "no-such-task"}),
        ("/compare", {"task": "email_ops_001", "models": "sim-oracle,nobody"}),
        ("/no-such-page", {}),
    ):
        response = _get(viewer, path, **params)
        assert response.status_code == 404, path
        assert "<script>" not in response.text


def test_model_output_is_escaped_never_markup(viewer: str, viewer_catalog: ViewedCatalog) -> None:
    rollout_id = viewer_catalog.rollout_id("s.model_name = ?", [HOSTILE])
    response = _get(viewer, f"/rollouts/{rollout_id}")
    assert response.status_code == 200
    page = response.text
    # In the transcript, the tool arguments, the observation, the state diff and the verifier message alike.
    assert "window.pwned" in page
    for markup in ("<script>window.pwned", "<img src=x", '<b id="injected">', "<i>lunch</i>"):
        assert markup not in page
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page
    assert "&lt;i&gt;lunch&lt;/i&gt;" in page
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy
    listing = _get(viewer, "/rollouts", model=HOSTILE).text
    assert "<script>" not in listing


def test_a_rollout_page_shows_what_every_table_holds(viewer: str, viewer_catalog: ViewedCatalog) -> None:
    judged = viewer_catalog.rollout_id("s.model_name = ? and s.scenario_id = ?", [JUDGED_MODEL, EMAIL])
    page = _get(viewer, f"/rollouts/{judged}").text
    verdicts = viewer_catalog.rows("select * from verifications_latest where rollout_id = ?", [judged])
    assert {v["kind"] for v in verdicts} == {"programmatic", "rubric"}
    for verdict in verdicts:
        assert verdict["verifier_version"] in page
    rubric = next(v for v in verdicts if v["kind"] == "rubric")
    assert "Evidence" in page and html.escape(rubric["message"]) in page
    for judgement in viewer_catalog.rows("select * from judgements_latest where rollout_id = ?", [judged]):
        assert judgement["judge_model"] in page and html.escape(judgement["rationale"]) in page
    row = viewer_catalog.rows("select * from rollouts where rollout_id = ?", [judged])[0]
    assert f'<span id="tokens">{row["total_tokens"]:,}</span>' in page
    assert "sim-oracle (simulated)" in page and "is a simulated model" in page
    assert "Whole-rollout state diff" in page and "before / after" in page

    chat = viewer_catalog.rollout_id("s.model_name = ? and s.task_id = ?", [JUDGED_MODEL, NPC_TASK])
    chat_page = _get(viewer, f"/rollouts/{chat}").text
    # Kept only in the rollout's trace: Jonas's answer is read from there.
    assert "NPC conversations" in chat_page and "<h3>jonas_weber</h3>" in chat_page
    assert chat_page.count('class="turn role-npc"') >= 1

    errored = viewer_catalog.rollout_id("s.model_name = ?", [BROKEN])
    error_page = _get(viewer, f"/rollouts/{errored}").text
    assert '<code id="error-class">model_endpoint</code>' in error_page
    # One retry: the first attempt's error is a status event of its own.
    assert "attempt 1 ended in error: model_endpoint, retried" in error_page
    assert "broken-endpoint (simulated)" not in error_page
    # Everywhere a status appears, an error reads as an error with its class, never as a failure of the agent.
    assert '<dd id="status">error: model_endpoint</dd>' in error_page
    assert "no verdict" in error_page and "0/1" not in error_page
    assert "ended failed" not in error_page and "failed (agent_error)" not in error_page
    stored = viewer_catalog.rows("select error from rollouts where rollout_id = ?", [errored])[0]["error"]
    error_list = _get(viewer, "/rollouts", sweep=SWEEP_ID, error_class="model_endpoint", per_page=200).text
    assert '<th class="text">error message</th>' in error_list and errored in _ids(error_list)
    assert stored[:80] in html.unescape(error_list)
    assert '<th class="text">error message</th>' not in _get(viewer, "/rollouts", sweep=SWEEP_ID).text


def test_every_state_diff_of_a_call_is_shown_with_that_call(viewer_catalog: ViewedCatalog) -> None:
    snapshot = ViewerCatalog(viewer_catalog.db).snapshot()
    ids = [str(row["rollout_id"]) for row in viewer_catalog.rows("select rollout_id from rollouts")]
    per_call = viewer_catalog.rows("select count(*) as n from state_diffs where scope = 'tool_call'")[0]["n"]
    attached = 0
    for rollout_id in ids:
        transcript = snapshot.rollout(rollout_id).transcript
        assert transcript.unmatched_diffs == [] and transcript.unanswered == []
        for turn in transcript.turns:
            for diff in turn.call.diffs if turn.call else []:
                assert (diff.tool_server, diff.tool_name) == (turn.call.tool_server, turn.call.tool_name)
                attached += 1
    assert attached == per_call > 0


def test_compare_shows_two_models_side_by_side(viewer: str, viewer_catalog: ViewedCatalog) -> None:
    page = _get(viewer, "/compare", task="email_ops_001", models=f"{JUDGED_MODEL},{BROKEN}").text
    assert page.count('class="side"') == 2
    assert "sim-oracle (simulated)" in page and f"<h2>{BROKEN}</h2>" in page
    assert "model_endpoint" in page and page.count('class="transcript"') == 2
    # Any rollout of either side may be the one shown, and the other side keeps its own.
    second = viewer_catalog.rollout_id(
        "s.model_name = ? and s.task_id = 'email_ops_001' and s.rollout_index = 1", [JUDGED_MODEL]
    )
    picked = _get(viewer, "/compare", task="email_ops_001", models=f"{JUDGED_MODEL},{BROKEN}", a=second).text
    assert re.findall(r'<h3>Rollout <a href="/rollouts/([^"]+)"', picked)[0] == second
    assert (
        _get(viewer, "/compare", task="email_ops_001", models=f"{JUDGED_MODEL},{BROKEN}", a="nope").status_code == 400
    )
    choose = _get(viewer, "/compare", task="email_ops_001").text
    assert "sim-noisy (simulated) vs sim-oracle (simulated)" in choose
    one = _get(viewer, "/compare", task="email_ops_001", models=JUDGED_MODEL)
    assert one.status_code == 400


def test_a_rebuilt_catalog_is_read_without_a_restart(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_warehouse(first, attempts_with({"t-1": (2, 1)}, sweep_id="before-rebuild"))
    write_warehouse(second, attempts_with({"t-1": (2, 2)}, sweep_id="after-rebuild", created_at=T0 + timedelta(days=1)))
    db = build_catalog(first, tmp_path / "eval.duckdb").path
    with BackgroundServer(create_app(db)) as server:
        assert "before-rebuild" in _get(server.url, "/").text
        build_catalog(second, db)  # swapped in under the running viewer, as the pipeline does
        page = _get(server.url, "/").text
        assert "after-rebuild" in page and "before-rebuild" not in page


def test_view_without_a_catalog_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "eval.duckdb"
    assert main(["view", "--db", str(missing), "--port", str(free_port())]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert f"{missing}: no catalog yet" in err and "eval-pipelines sweep" in err


def test_view_serves_until_interrupted(viewer_catalog: ViewedCatalog) -> None:
    port = free_port()
    command = [sys.executable, "-m", "eval_pipelines.cli", "view", "--db", str(viewer_catalog.db), "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ)
    try:
        assert process.stdout is not None
        announced = process.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in announced, process.stderr.read() if process.stderr else ""
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200
        # The same port again: refused before serving, as a user error.
        assert main(["view", "--db", str(viewer_catalog.db), "--port", str(port)]) == EXIT_USER_ERROR
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
