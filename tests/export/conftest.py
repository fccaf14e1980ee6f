"""Catalogs to export, and readers that check the exports with the tools that consume them.

`sweep_catalog` is a small real sweep: the built-in scenarios run through the embedded evaluation service and
`pipeline.steps` (run, collect, verify, build the catalog), as the reliability suites run theirs, by four models:
two simulated ones, one whose endpoint is down (every rollout errors, after one retry), and a scripted endpoint
that sends arguments that are not JSON and calls a tool that fails. `report_catalog` is the reports suite's
synthetic two-sweep warehouse (no transcripts), for the quick tests.

The Inspect AI side runs in `benchmarks/.venv-inspect` (made by `.ci/run`; see the README's benchmark section),
never in this project's venv.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.lib.serving import BackgroundServer, free_port
from eval_pipelines.local.services import local_evaluation_service
from eval_pipelines.pipeline.steps import run_and_collect, verify_partition
from eval_pipelines.schemas.runs import RunLaunchRequest
from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse
from tests.reports.conftest import report_attempts
from tests.reports.synthetic_warehouse import build
from tests.support.scripted_llm import Script, create_scripted_app, text_reply, tool_call_reply

INSPECT_PYTHON = Path(__file__).resolve().parents[2] / "benchmarks" / ".venv-inspect" / "bin" / "python"
needs_inspect = pytest.mark.skipif(
    not INSPECT_PYTHON.is_file(),
    reason="benchmarks/.venv-inspect (inspect-ai) is not installed: python3 -m venv benchmarks/.venv-inspect && "
    "benchmarks/.venv-inspect/bin/pip install -r benchmarks/requirements-inspect.txt",
)

SWEEP_ID = "export-test"
SCENARIOS = {"email_ops:1.0.0": ["email_ops_001", "email_ops_002"], "team_chat:1.0.0": ["team_chat_001"]}
SIMULATED = ("sim-oracle", "sim-noisy")
BROKEN = "broken-endpoint"
SCRIPTED = "scripted"
ROLLOUT_COUNT = 2


@dataclass(frozen=True)
class SweepCatalog:
    db: Path
    sweep_id: str

    def rows(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        con = connect_read_only(self.db)
        try:
            cursor = con.execute(sql, params or [])
            names = [d[0] for d in cursor.description or []]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            con.close()


def _run(
    backend: EvaluationBackend,
    warehouse: Warehouse,
    data: Path,
    scenario: ScenarioFiles,
    name: str,
    config: dict[str, Any],
    *,
    task_ids: list[str],
    rollout_count: int = ROLLOUT_COUNT,
    max_parallel: int = 4,
    error_retries: int = 0,
) -> None:
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": scenario.scenario_id,
            "task_ids": task_ids,
            "model_config": config,
            "rollout_count": rollout_count,
            "max_parallel": max_parallel,
            "run_name": f"export-{name}-{uuid.uuid4().hex[:8]}",
            "error_retries": error_retries,
            "error_retry_backoff_seconds": 0.01,
            "rollout_timeout_seconds": 30,
        }
    )
    ctx = RolloutContext(
        sweep_id=SWEEP_ID,
        run_name=request.run_name or "",
        model_key=name,
        scenario_key=scenario.key,
        model_name=name,
        is_simulated=config["base_url"].startswith("sim://"),
        base_url=config["base_url"],
    )
    run_and_collect(backend, request, ctx, scenario, warehouse, data / "artifacts", timeout_seconds=60)
    verify_partition(warehouse, scenario, name, scenario.key, sweep_id=SWEEP_ID)


@pytest.fixture(scope="session")
def sweep_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SweepCatalog]:
    data = tmp_path_factory.mktemp("export-sweep") / "data"
    data.mkdir()
    catalog = ScenarioCatalog(builtin_scenarios_dir())
    warehouse = Warehouse(data / "warehouse")
    # One rollout, one request at a time: the script's replies are handed out in request order.
    script = Script(
        [
            tool_call_reply("email__send_email", "{not json", call_id="call_bad_args"),
            tool_call_reply("email__get_email", {"email_id": "no-such-email"}, call_id="call_missing"),
            text_reply("I could not send it."),
        ]
    )
    scripted = BackgroundServer(create_scripted_app(script)).start()
    try:
        with local_evaluation_service(data, catalog.root) as local:
            backend = local.backend()
            try:
                for scenario_id, task_ids in SCENARIOS.items():
                    scenario = catalog.get(scenario_id)
                    for name in SIMULATED:
                        config = {"model": name, "base_url": "sim://local", "api_key": "x"}
                        _run(backend, warehouse, data, scenario, name, config, task_ids=task_ids)
                    down = {"model": "down", "base_url": f"http://127.0.0.1:{free_port()}/v1", "api_key": "x"}
                    _run(backend, warehouse, data, scenario, BROKEN, down, task_ids=task_ids, error_retries=1)
                scripted_config = {"model": "scripted", "base_url": f"{scripted.url}/v1", "api_key": "x"}
                email = catalog.get("email_ops:1.0.0")
                _run(
                    backend,
                    warehouse,
                    data,
                    email,
                    SCRIPTED,
                    scripted_config,
                    task_ids=["email_ops_001"],
                    rollout_count=1,
                    max_parallel=1,
                )
            finally:
                backend.close()
    finally:
        scripted.stop()
    yield SweepCatalog(build_catalog(warehouse.root, data / "eval.duckdb").path, SWEEP_ID)


@pytest.fixture(scope="session")
def report_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sweeps of three models over two scenarios, built by the reports suite's synthetic warehouse."""
    return build(tmp_path_factory.mktemp("export-report-catalog"), report_attempts())


def scalar(db: Path, sql: str, params: list[Any] | None = None) -> Any:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(sql, params or []).fetchone()
        return None if row is None else row[0]
    finally:
        con.close()


#: Runs in the Inspect venv: lists the logs the way `inspect view` does, reads each in full (and its header alone)
#: with `read_eval_log`, fetches every sample again by its (id, epoch) with `read_eval_log_sample` (Inspect's own
#: key of a sample: the rollout it hands back, by uuid, is the test's check of the grouping), and prints what the
#: tests compare with the catalog.
_READ_LOGS = r"""
import json, sys
from inspect_ai.log import list_eval_logs, read_eval_log, read_eval_log_sample, read_eval_log_sample_summaries

listed = sorted(info.name.removeprefix("file://") for info in list_eval_logs(sys.argv[1]))
logs = []
for name in listed:
    header = read_eval_log(name, header_only=True)
    log = read_eval_log(name)
    assert header.eval.model == log.eval.model and header.results.total_samples == log.results.total_samples
    assert header.status == log.status
    by_key = {(s.id, s.epoch): read_eval_log_sample(name, id=s.id, epoch=s.epoch).uuid for s in log.samples}
    summaries = read_eval_log_sample_summaries(name)
    samples = []
    for s in log.samples:
        messages = []
        for m in s.messages:
            entry = {"role": m.role, "text": m.text}
            if m.role == "assistant":
                entry["tool_calls"] = [
                    {"id": c.id, "function": c.function, "arguments": c.arguments, "parse_error": c.parse_error}
                    for c in m.tool_calls or []
                ]
            if m.role == "tool":
                entry.update(tool_call_id=m.tool_call_id, function=m.function,
                             error=None if m.error is None else {"type": m.error.type, "message": m.error.message})
            messages.append(entry)
        samples.append({
            "id": s.id, "epoch": s.epoch, "uuid": s.uuid, "input": s.input,
            "uuid_by_id_and_epoch": by_key[(s.id, s.epoch)],
            "scores": None if s.scores is None else {
                k: {"value": v.value, "explanation": v.explanation, "metadata": v.metadata} for k, v in s.scores.items()
            },
            "error": None if s.error is None else s.error.message,
            "error_retries": [e.message for e in s.error_retries or []],
            "messages": messages,
            "completion": s.output.completion,
            "model_usage": {k: v.model_dump() for k, v in s.model_usage.items()},
            "metadata": s.metadata,
            "limit": None if s.limit is None else s.limit.type,
            "summary_error": s.summary().error,
        })
    logs.append({
        "name": name,
        "version": log.version,
        "status": log.status,
        "error": None if log.error is None else log.error.message,
        "dataset_samples": log.eval.dataset.samples,
        "sample_ids": log.eval.dataset.sample_ids,
        "epochs": log.eval.config.epochs,
        "fail_on_error": log.eval.config.fail_on_error,
        "continue_on_fail": log.eval.config.continue_on_fail,
        "summaries": [{"id": x.id, "epoch": x.epoch, "error": x.error} for x in summaries],
        "task": log.eval.task,
        "model": log.eval.model,
        "tags": log.eval.tags,
        "metadata": log.eval.metadata,
        "total_samples": log.results.total_samples,
        "completed_samples": log.results.completed_samples,
        "scores": [
            {"name": s.name, "scored": s.scored_samples, "unscored": s.unscored_samples,
             "metrics": {k: m.value for k, m in s.metrics.items()}}
            for s in log.results.scores
        ],
        "model_usage": {k: v.model_dump() for k, v in log.stats.model_usage.items()},
        "samples": samples,
    })
print(json.dumps(logs))
"""


def read_inspect_logs(log_dir: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(INSPECT_PYTHON), "-c", _READ_LOGS, str(log_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    logs: list[dict[str, Any]] = json.loads(result.stdout)
    return logs


#: Runs in the Inspect venv, which has the `openai` package: every line's messages, tool calls and tools against
#: openai's own parameter types (its tool-call lists are lazy iterables to pydantic, so each call is checked alone).
_CHECK_OPENAI = r"""
import json, sys
from pydantic import TypeAdapter
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCallParam, ChatCompletionMessageParam, ChatCompletionToolParam,
)

messages = TypeAdapter(list[ChatCompletionMessageParam])
call = TypeAdapter(ChatCompletionMessageFunctionToolCallParam)
tools = TypeAdapter(list[ChatCompletionToolParam])
checked = 0
with open(sys.argv[1]) as handle:
    for line in handle:
        row = json.loads(line)
        messages.validate_python(row["messages"], strict=True)
        for message in row["messages"]:
            for tool_call in message.get("tool_calls") or []:
                call.validate_python(tool_call, strict=True)
        if row["tools"] is not None:
            tools.validate_python(row["tools"], strict=True)
        checked += 1
print(checked)
"""


def check_with_openai_types(jsonl: Path) -> int:
    result = subprocess.run(
        [str(INSPECT_PYTHON), "-c", _CHECK_OPENAI, str(jsonl)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return int(result.stdout.strip())
