"""A SimLab verifier reads the NPC conversations as SimLab's NPC chat leaves them in the run's metadata:
`npc_chat_transcripts` (NPC name -> {role, messages: [{role: user | assistant, content}]}) and
`npc_chat_message_count`, here made from the chat server's DM rooms (`npc_transcripts`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.simlab_bundle import import_bundle
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.verifiers.simlab_view import SimLabRunArtifacts
from tests.support.ask_sarah import ASK_SARAH_ID, make_ask_sarah_the_only_task
from tests.support.task_runs import run_one_task

from .test_bundle_import import SCENARIO_ID, write_bundle

TRANSCRIPT_VERIFIER = '''"""Checks, from SimLab's NPC chat metadata, that the agent asked Sarah about her order."""


def verify(run_artifacts):
    transcripts = run_artifacts.metadata["npc_chat_transcripts"]
    sarah = transcripts["Sarah Chen"]
    if sarah["role"] != "frustrated_customer":
        return False, "Sarah's role: " + repr(sarah["role"])
    said = [m["content"] for m in sarah["messages"] if m["role"] == "user"]
    answered = [m["content"] for m in sarah["messages"] if m["role"] == "assistant"]
    if not said:
        return False, "nobody wrote to Sarah"
    if "order" not in said[0] or not answered:
        return False, "Sarah was not asked about her order: " + repr(sarah["messages"])
    count = run_artifacts.metadata["npc_chat_message_count"]
    return True, "asked; messages: " + str(count)
'''


def test_the_view_gives_simlabs_transcripts_of_the_npcs_its_chat_plays() -> None:
    chat_state = {
        "npcs": {
            "sarah_chen": {"first_name": "Sarah", "last_name": "Chen", "personality": {"role": "frustrated_customer"}},
            "li_wei": {"first_name": "Li", "last_name": "Wei", "occupation": "Buyer", "personality": {"role": ""}},
            "bob": {"first_name": "Bob", "last_name": "Stone"},  # a plain profile: SimLab's NPC chat has no Bob
        }
    }
    ours = {
        "sarah_chen": [{"role": "agent", "content": "Hi", "timestamp": "1"}, {"role": "npc", "content": "Late!"}],
        "li_wei": [],
        "bob": [{"role": "agent", "content": "Hello"}],
    }
    artifacts = RunArtifacts(
        task_id="t",
        task="x",
        metadata={"state": {"chat": {"initial": {}, "final": chat_state}}, "npc_transcripts": ours},
    )
    metadata = SimLabRunArtifacts(artifacts).metadata
    assert metadata["npc_chat_transcripts"] == {
        "Sarah Chen": {
            "role": "frustrated_customer",
            "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Late!"}],
        },
        "Li Wei": {"role": "Buyer", "messages": []},
    }
    assert metadata["npc_chat_message_count"] == 2
    assert "npc_chat_transcripts" not in artifacts.metadata  # the view's, never written into the artifacts
    assert "npc_chat_transcripts" not in SimLabRunArtifacts(RunArtifacts(task_id="t", task="x")).metadata


@pytest.mark.slow
def test_a_simlab_verifier_reads_the_rollouts_npc_chat_transcripts(
    tmp_path: Path, local_backend: Callable[..., EvaluationBackend]
) -> None:
    bundle = write_bundle(tmp_path)
    make_ask_sarah_the_only_task(bundle, "sarah_transcript", TRANSCRIPT_VERIFIER)
    assert import_bundle(bundle, tmp_path / "scenarios", SCENARIO_ID).unrunnable == {}
    backend = local_backend(tmp_path / "data", ScenarioCatalog(tmp_path / "scenarios"))

    def run(model: str) -> Any:
        rollout = run_one_task(backend, SCENARIO_ID, ASK_SARAH_ID, model=model, run_label="transcripts")
        [verdict] = rollout.result.verifiers
        return verdict

    oracle = run("sim-oracle")
    assert oracle.success and oracle.message == "asked; messages: 2", oracle.message
    idle = run("sim-noop")
    assert not idle.success and not idle.is_error and idle.message == "nobody wrote to Sarah"
