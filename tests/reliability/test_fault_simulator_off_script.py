"""Simulators that go off script: an NPC that tells its secret before anyone asked, and a simulated user that ends
the conversation before the agent had a turn. Both rollouts are `simulator_off_script` errors, outside the pass
rate's denominator, and the catalog's `simulator_fidelity` view shows their share per scenario.

The NPC runs through the embedded backend and `run_and_collect` on team_chat_003 (Priya Raman holds the lab's door
code, to be told only when asked about it), with a scripted agent that greets her without asking and a third-party
NPC model that blurts the code out; a control run with the built-in simulated NPC stays on script and passes. The
user runs through the engine on a multi-turn task, and its rollout goes through the warehouse like any other.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.pipeline.steps import run_and_collect, verify_partition
from eval_pipelines.reports.data import pass_rate_rows
from eval_pipelines.reports.html import _errors
from eval_pipelines.schemas.artifacts import CHECK_ENDING, CHECK_SECRET_UNASKED, META_SIMULATOR_CHECKS
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import ErrorClass, Rollout, RunLaunchRequest
from eval_pipelines.service.scheduler import RunScheduler
from eval_pipelines.service.store import RunStore
from eval_pipelines.service.workers import WorkerJob
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.verifiers.loader import load_verifier_package
from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from eval_pipelines.warehouse.rows import RolloutContext, rollout_tables
from eval_pipelines.warehouse.store import Warehouse
from tests.engine.test_engine import _execute
from tests.support.scripted_llm import Script, create_scripted_app, text_reply, tool_call_reply
from tests.users.test_users import STOP, TASK, VERIFIER, _config, _spec

SCENARIO_ID = "team_chat:1.0.0"
SECRET_TASK = "team_chat_003"
CODE = "4827#"
#: The agent greets Priya without naming any of her reveal topics, then emails the code on (it read it in her reply).
AGENT_REPLIES = [
    tool_call_reply("chat__send_dm", {"room_id": "dm-priya_raman", "message": "Hi Priya, how was your weekend?"}),
    tool_call_reply(
        "email__send_email",
        {
            "to": "sam.ortiz@example.com",
            "subject": "Lab access for Monday",
            "body": f"Hi Sam,\n\nWelcome! The door code of the hardware lab is {CODE}. Please keep it to yourself.",
        },
        "call_2",
    ),
    text_reply("I emailed Sam the hardware lab's door code."),
]


def _query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    con = connect_read_only(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _npc_run(
    backend: EvaluationBackend, catalog: ScenarioCatalog, warehouse: Warehouse, model: str, agent_url: str, npc: Any
) -> Any:
    scenario = catalog.get(SCENARIO_ID)
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": SCENARIO_ID,
            "task_ids": [SECRET_TASK],
            "model_config": {"model": "scripted-agent", "base_url": agent_url, "api_key": "x"},
            "user_model_config": npc,
            "rollout_count": 1,
            "run_name": f"off-script-{model}-{uuid.uuid4().hex[:12]}",
            "error_retries": 1,
            "error_retry_backoff_seconds": 0.01,
        }
    )
    ctx = RolloutContext("off-script", request.run_name or "", model, scenario.key, model, is_simulated=False)
    summary = run_and_collect(backend, request, ctx, scenario, warehouse, warehouse.root / "traces", timeout_seconds=60)
    verify_partition(warehouse, scenario, model, scenario.key)
    [rollout] = backend.list_rollouts(summary.run_id)
    return rollout


def test_an_npc_that_tells_its_secret_unasked_is_a_simulator_error_outside_the_pass_rate(
    catalog: ScenarioCatalog, data_dir: Path, serve: Any, local_backend: Callable[..., EvaluationBackend]
) -> None:
    backend = local_backend(data_dir, catalog)
    warehouse = Warehouse(data_dir / "warehouse")
    blurting = serve(create_scripted_app(Script([text_reply(f"Good, thanks! Oh, the lab's door code is {CODE}.")])))
    npc = {"model": "npc-model", "base_url": f"{blurting.url}/v1", "api_key": "npc-key"}
    agents = [serve(create_scripted_app(Script(list(AGENT_REPLIES)))) for _ in range(2)]
    strayed = _npc_run(backend, catalog, warehouse, "blurted", f"{agents[0].url}/v1", npc)
    # The control: the built-in simulated NPC keeps the code to itself when nobody asks about it.
    kept = _npc_run(backend, catalog, warehouse, "kept", f"{agents[1].url}/v1", None)

    result = strayed.result
    assert (result.error_class, result.attempts) == (ErrorClass.SIMULATOR_OFF_SCRIPT, 1), result.message
    assert not result.success and "npc:priya_raman went off script (secret_only_when_asked" in result.message
    [check] = [c for c in backend.get_artifacts(strayed.rollout_id).metadata[META_SIMULATOR_CHECKS] if not c["passed"]]
    assert (check["check"], check["method"]) == (CHECK_SECRET_UNASKED, "deterministic")
    assert kept.result.error_class is None, kept.result.message

    db = data_dir / "eval.duckdb"
    build_catalog(warehouse.root, db)
    scores = dict(_query(db, "select model_name, coalesce(error_class, outcome) from rollout_scores"))
    assert scores == {"blurted": "simulator_off_script", "kept": "failed"}
    # The off-script rollout is in neither n nor the pass rate: the agent is not blamed for what the NPC did.
    rates = _query(db, "select model_name, n, n_errors, pass_rate from pass_rates order by model_name")
    assert rates == [("blurted", 0, 1, None), ("kept", 1, 0, 0.0)]
    fidelity = _query(
        db,
        "select model_name, n_with_simulator, n_off_script, n_off_script_deterministic, n_off_script_judge, "
        "off_script_share, error_share from simulator_fidelity order by model_name",
    )
    assert fidelity == [("blurted", 1, 1, 1, 0, 1.0, 1.0), ("kept", 1, 0, 0, 0, 0.0, 0.0)]
    failures = _query(
        db,
        "select model_name, simulator_kind, check_name, method, n_checked, n_failed, sample_rollout_id "
        "from simulator_check_failures where n_failed > 0",
    )
    assert failures == [("blurted", "npc", CHECK_SECRET_UNASKED, "deterministic", 1, 1, strayed.rollout_id)]
    # The CLI's and the report's error cells say how many of the errors the simulators caused.
    _, rows = pass_rate_rows(db, "off-script")
    cells = {row["model_name"]: _errors(row) for row in rows}
    assert cells == {"blurted": "1 (100%; 1 simulator off script)", "kept": "0"}


async def test_a_simulated_user_that_ends_in_its_opening_is_a_simulator_error_outside_the_pass_rate(
    serve: Any, tool_host: Any, tmp_path: Path
) -> None:
    book = ReferenceBook()
    book.add_task(TASK)
    sim = serve(create_sim_app(book))
    quitter = serve(create_scripted_app(Script([text_reply(f"Hi. Actually, never mind. {STOP}")])))
    package = tmp_path / "verifiers"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ending.py").write_text(VERIFIER)
    user: ModelConfig = _config(f"{quitter.url}/v1", "user-model")
    outcome = await _execute(_spec(sim.url, tool_host.base_url("email"), load_verifier_package(package), user))

    assert outcome.error_class == ErrorClass.SIMULATOR_OFF_SCRIPT and not outcome.result.success
    assert not outcome.error_class.is_retryable
    assert "simulator user went off script (ended_on_its_conditions, deterministic)" in outcome.result.message
    failed = [c for c in outcome.artifacts.metadata[META_SIMULATOR_CHECKS] if not c["passed"]]
    assert [(c["simulator"], c["check"]) for c in failed] == [("user", CHECK_ENDING)]

    rollout = Rollout(
        rollout_id="ro_users",
        scenario_id="users_test",
        task_id=TASK.task_id,
        run_id="run_users",
        status=outcome.status,
        result=outcome.result,
        termination_reason=outcome.termination_reason.value,
    )
    warehouse = Warehouse(tmp_path / "warehouse")
    ctx = RolloutContext("users", "run", "m", "users_test", "m", is_simulated=False)
    warehouse.write_streams(
        [rollout_tables(ctx, [(rollout, outcome.artifacts, None)])],
        model_key="m",
        scenario_key="users_test",
        file_stem="run_users",
    )
    db = tmp_path / "eval.duckdb"
    build_catalog(warehouse.root, db)
    assert _query(db, "select outcome, error_class from rollout_scores") == [("error", "simulator_off_script")]
    assert _query(db, "select n, n_errors, pass_rate from pass_rates") == [(0, 1, None)]
    assert _query(db, "select n_with_simulator, n_off_script, off_script_share from simulator_fidelity") == [
        (1, 1, 1.0)
    ]
    assert _query(db, "select simulator, check_name, method, passed from simulator_checks order by check_name") == [
        ("user", CHECK_ENDING, "deterministic", False),
        ("user", "stayed_in_character", "deterministic", True),
    ]


def test_the_judge_named_in_the_launch_reaches_the_rollouts_and_its_verdict_is_counted_apart(
    catalog: ScenarioCatalog, data_dir: Path, serve: Any, local_backend: Callable[..., EvaluationBackend]
) -> None:
    """The agent asks Priya properly and the built-in NPC answers by its script, so every deterministic check
    passes; the judge (named in the launch request, as a sweep's `simulator_judge` names it) finds a contradiction,
    and the rollout is a simulator error decided by the judge."""
    backend = local_backend(data_dir, catalog)
    warehouse = Warehouse(data_dir / "warehouse")
    asking = [
        tool_call_reply("chat__send_dm", {"room_id": "dm-priya_raman", "message": "Priya, what's the door code?"}),
        *AGENT_REPLIES[1:],
    ]
    agent = serve(create_scripted_app(Script(asking)))
    reason = "Priya signs as someone her persona is not."
    judge_script = Script([text_reply(f'Verdict: {{"followed": false, "reason": "{reason}"}}')])
    judge = serve(create_scripted_app(judge_script))
    scenario = catalog.get(SCENARIO_ID)
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": SCENARIO_ID,
            "task_ids": [SECRET_TASK],
            "model_config": {"model": "scripted-agent", "base_url": f"{agent.url}/v1", "api_key": "x"},
            "simulator_judge_config": {"model": "judge", "base_url": f"{judge.url}/v1", "api_key": "judge-key"},
            "run_name": f"off-script-judged-{uuid.uuid4().hex[:12]}",
        }
    )
    ctx = RolloutContext("off-script", request.run_name or "", "judged", scenario.key, "judged", is_simulated=False)
    summary = run_and_collect(backend, request, ctx, scenario, warehouse, warehouse.root / "traces", timeout_seconds=60)
    [rollout] = backend.list_rollouts(summary.run_id)
    assert rollout.result is not None and rollout.result.error_class == ErrorClass.SIMULATOR_OFF_SCRIPT
    assert f"(followed_its_instructions, judge): {reason}" in rollout.result.message
    assert len(judge_script.requests) == 1 and "4827#" in judge_script.requests[0]["messages"][-1]["content"]
    # The judge's key reached its endpoint and nowhere else: the stored request keeps the config without it.
    store_files = (data_dir / "service").glob("runs.sqlite3*")  # the store and its write-ahead log
    assert not [f.name for f in store_files if b"judge-key" in f.read_bytes()]
    stored = RunStore(data_dir / "service" / "runs.sqlite3").run_request(summary.run_id) or {}
    assert stored["simulator_judge_config"]["model"] == "judge" and "api_key" not in stored["simulator_judge_config"]
    assert RunScheduler._stored_judge_config(summary.run_id, stored["simulator_judge_config"]) is None
    simulated = {**stored["simulator_judge_config"], "base_url": "sim://local"}
    assert RunScheduler._stored_judge_config(summary.run_id, simulated) is not None
    verify_partition(warehouse, scenario, "judged", scenario.key)
    db = data_dir / "eval.duckdb"
    build_catalog(warehouse.root, db)
    assert _query(db, "select n, n_errors from pass_rates") == [(0, 1)]
    assert _query(
        db,
        "select n_off_script, n_off_script_deterministic, n_off_script_judge, off_script_share from simulator_fidelity",
    ) == [(1, 0, 1, 1.0)]
    checks = _query(db, "select check_name, method, passed from simulator_checks order by method, check_name")
    assert checks == [
        (CHECK_SECRET_UNASKED, "deterministic", True),
        ("stayed_in_character", "deterministic", True),
        ("followed_its_instructions", "judge", False),
    ]


def test_a_worker_job_carries_the_simulator_judge_with_its_key() -> None:
    config = ModelConfig(model="agent", api_key="agent-key", base_url="http://127.0.0.1:1/v1")
    judge = ModelConfig(model="judge", api_key="judge-key", base_url="http://127.0.0.1:2/v1")
    job = WorkerJob(Path("s"), Path("a"), Path("c"), "run", config, None, 2, 30.0, {}, 1, judge)
    back = WorkerJob.from_wire(job.to_wire())
    assert back.simulator_judge_config is not None and back.simulator_judge_config.reveal_api_key() == "judge-key"
    assert (
        WorkerJob.from_wire(
            WorkerJob(Path("s"), Path("a"), Path("c"), "run", config, None, 2, 30.0, {}, 1).to_wire()
        ).simulator_judge_config
        is None
    )
