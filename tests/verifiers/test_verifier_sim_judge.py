"""`sim-judge` served by the real simulated-model app, driven by the real rubric judge over replayed rollouts."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.llm.client import ChatClient
from eval_pipelines.schemas.verifiers import JudgeVerdict
from eval_pipelines.sim.endpoint import SIMULATED_FINGERPRINT, ReferenceBook, create_sim_app
from eval_pipelines.sim.judge import SIM_JUDGE, criteria_of, salient_terms, sim_judge_persona
from eval_pipelines.verifiers.loader import load_verifier_package
from eval_pipelines.verifiers.protocol import verify_task
from eval_pipelines.verifiers.rubric import RubricJudge
from tests.verifiers.conftest import NOOP, REFERENCE, Replays


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with BackgroundServer(create_sim_app(ReferenceBook(), personas={SIM_JUDGE: sim_judge_persona})) as server:
        yield f"{server.url}/v1"


def _judge(sim_url: str) -> RubricJudge:
    return RubricJudge(ChatClient(sim_url, "any-key", timeout_seconds=10), SIM_JUDGE)


async def test_sim_judge_agrees_with_the_programmatic_verifiers(
    sim_url: str, email_ops: ScenarioFiles, replays: Replays
) -> None:
    """On every email_ops task: reference runs pass both, runs that did nothing fail both."""
    package = load_verifier_package(email_ops.verifiers_dir)
    judge = _judge(sim_url)
    disagreements = []
    for task in email_ops.tasks().values():
        for variant, expected in ((REFERENCE, True), (NOOP, False)):
            artifacts = replays[(task.task_id, variant)]
            programmatic = all(o.success for o in verify_task(package, task.verifiers, artifacts))
            judged = await judge.judge(artifacts, task.rubric)
            assert judged.verdict != JudgeVerdict.ERROR, judged.reason
            assert judged.cost_usd == 0.0 and judged.prompt_tokens > 0
            if not (programmatic == judged.success == expected):
                disagreements.append((task.task_id, variant, programmatic, judged.score, judged.failed_criteria))
    assert disagreements == []


async def test_replies_are_labelled_simulated_and_deterministic(
    sim_url: str, email_ops: ScenarioFiles, replays: Replays
) -> None:
    task = email_ops.task("email_ops_005")
    judge = _judge(sim_url)
    request = judge.request(
        replays[(task.task_id, REFERENCE)], judge.rubric_text(replays[(task.task_id, REFERENCE)], task.rubric)[0] or ""
    )
    first = await judge.client.complete(request)
    second = await judge.client.complete(request)
    assert first.system_fingerprint == SIMULATED_FINGERPRINT
    assert first.text == second.text
    reply = json.loads(first.text)
    assert set(reply) == {"verdict", "score", "confidence", "evidence", "failed_criteria", "dimension_scores"}
    assert reply["verdict"] == "PASS" and reply["score"] == 1.0
    assert {d["dimension"] for d in reply["dimension_scores"]} == set(task.rubric.success_criteria)  # type: ignore[union-attr]


async def test_sim_judge_reads_only_the_rubric_it_is_shown(
    sim_url: str, email_ops: ScenarioFiles, replays: Replays
) -> None:
    """A rubric_markdown override the reference run does not satisfy turns the sim judge's PASS into a FAIL."""
    artifacts = replays[("email_ops_001", REFERENCE)]
    judge = _judge(sim_url)
    task = email_ops.task("email_ops_001")
    assert (await judge.judge(artifacts, task.rubric)).verdict == JudgeVerdict.PASS

    override = "Grade strictly.\n\n## Success criteria\n- The subject names the 'Quarterly Gala'\n- Sent to Aisha\n"
    judged = await judge.judge(artifacts, task.rubric, rubric_markdown=override)
    assert judged.verdict == JudgeVerdict.FAIL and judged.score == 0.5
    assert judged.failed_criteria == ["The subject names the 'Quarterly Gala'"]


def test_the_documented_rule() -> None:
    assert salient_terms("Email to Marcus with INV-2291, 18 and 'hold'") == ("hold", "Marcus", "INV-2291", "18")
    assert salient_terms("Elena receives Jane's original complaint") == ("Jane",)
    assert salient_terms("Body mentions 'pre-approval' and '$312.40'") == ("pre-approval", "$312.40")
    rubric = "# T\n## Success criteria\n- A 'x'\n* B 'y'\n## Scoring\n- **pass**: all"
    assert criteria_of(rubric) == ["A 'x'", "B 'y'"]
    assert criteria_of("Free-form:\n1. First 'a'\n2) Second 'b'\n## Scoring\n- pass") == ["First 'a'", "Second 'b'"]
