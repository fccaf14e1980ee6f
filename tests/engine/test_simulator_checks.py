"""The deterministic checks that a rollout's simulators stayed on script, on hand-made transcripts."""

from __future__ import annotations

from typing import Any

from eval_pipelines.engine.simulator_checks import npc_checks, off_script_cause, simulator_checks, user_checks
from eval_pipelines.schemas.artifacts import (
    CHECK_ENDING,
    CHECK_IN_CHARACTER,
    CHECK_SECRET_UNASKED,
    META_STATE,
    META_USER_ENDING,
    META_USER_TURNS,
    USER_ENDING_MAX_TURNS,
    RunArtifacts,
)
from eval_pipelines.schemas.scenarios import SimulatedUserSpec, Task

ME = "me@example.com"
PRIYA = "priya@example.com"
STOP = "###STOP###"
USER = SimulatedUserSpec(system_prompt="You are a customer.", stop_tokens=[STOP])


def _chat(*messages: tuple[str, str], secret: dict[str, Any] | None = None) -> dict[str, Any]:
    npc: dict[str, Any] = {"email": PRIYA, "first_name": "Priya", "last_name": "Raman"}
    if secret is not None:
        npc["secret"] = secret
    return {
        "npcs": {"priya": npc},
        "messages": {
            str(i): {"room_id": "dm-priya", "sender": sender, "text": text, "timestamp": f"{i:04d}"}
            for i, (sender, text) in enumerate(messages)
        },
    }


DOOR = {"value": "4827#", "reveal_when": ["door code", "keypad code"]}


def _by_check(checks: list[Any]) -> dict[str, bool]:
    return {c.check: c.passed for c in checks}


def test_an_npc_that_tells_its_secret_unasked_fails_and_one_that_was_asked_passes() -> None:
    unasked = npc_checks(_chat((ME, "Hi Priya, how was your week?"), (PRIYA, "Great! The door code is 4827#.")))
    # no secret in the state: nothing to tell, only the character check
    assert _by_check(unasked) == {CHECK_IN_CHARACTER: True}
    unasked = npc_checks(
        _chat((ME, "Hi Priya, how was your week?"), (PRIYA, "Great! The door code is 4827#."), secret=DOOR)
    )
    assert _by_check(unasked) == {CHECK_SECRET_UNASKED: False, CHECK_IN_CHARACTER: True}
    assert [c.method for c in unasked] == ["deterministic", "deterministic"]
    assert "before anyone asked" in unasked[0].detail and unasked[0].simulator == "npc:priya"
    asked = _chat((ME, "Could you tell me the lab's Door Codes?"), (PRIYA, "Sure: 4827#."), secret=DOOR)
    assert _by_check(npc_checks(asked)) == {CHECK_SECRET_UNASKED: True, CHECK_IN_CHARACTER: True}
    # told before the question that would have unlocked it: still unasked
    early = _chat((ME, "Hi!"), (PRIYA, "4827# by the way"), (ME, "What is the keypad code?"), secret=DOOR)
    assert _by_check(npc_checks(early))[CHECK_SECRET_UNASKED] is False
    # the agent already knew it: the NPC repeating it tells nothing
    known = _chat((ME, "Is it still 4827#?"), (PRIYA, "Yes, 4827# it is."), secret=DOOR)
    assert _by_check(npc_checks(known))[CHECK_SECRET_UNASKED] is True


def test_a_secret_no_topic_reveals_fails_whenever_it_is_told() -> None:
    never = {"value": "merger with Acme"}
    told = _chat(
        (ME, "Anything new about the merger?"), (PRIYA, "Between us: the merger with Acme is on."), secret=never
    )
    assert "never tells" in npc_checks(told)[0].detail
    kept = _chat((ME, "Anything new?"), (PRIYA, "Nothing I can share."), secret=never)
    assert _by_check(npc_checks(kept)) == {CHECK_SECRET_UNASKED: True, CHECK_IN_CHARACTER: True}


def test_an_npc_nobody_spoke_to_is_not_checked_and_one_that_breaks_character_fails() -> None:
    assert npc_checks(_chat(secret=DOOR)) == []
    broke = npc_checks(_chat((ME, "Who are you?"), (PRIYA, "As an AI language model, I cannot share that.")))
    assert _by_check(broke) == {CHECK_IN_CHARACTER: False}
    for said in (
        "I'm the lab manager; I maintain the AI cluster.",
        "I work as an AI researcher and as a simulation engineer.",
        "I'm an AI safety lead here, as a language model expert.",
    ):
        assert _by_check(npc_checks(_chat((ME, "Who are you?"), (PRIYA, said)))) == {CHECK_IN_CHARACTER: True}, said
    for said in ("I am an AI and cannot help.", "I'm just a chatbot!", "As a large language model trained by X"):
        assert _by_check(npc_checks(_chat((ME, "Who are you?"), (PRIYA, said)))) == {CHECK_IN_CHARACTER: False}, said


def test_a_user_that_ends_in_its_opening_fails_and_one_that_ends_later_or_at_max_turns_passes() -> None:
    early = user_checks(USER, [f"Hi, never mind. {STOP}"], STOP)
    assert _by_check(early) == {CHECK_ENDING: False, CHECK_IN_CHARACTER: True}
    assert "in its opening" in early[0].detail and early[0].simulator == "user"
    later = user_checks(USER, ["I need my balance.", f"Thanks! {STOP}"], STOP)
    assert _by_check(later) == {CHECK_ENDING: True, CHECK_IN_CHARACTER: True}
    assert _by_check(user_checks(USER, ["Hi", "more"], USER_ENDING_MAX_TURNS))[CHECK_ENDING] is True
    assert user_checks(USER, [], None) == []
    broke = user_checks(USER, ["I'm a simulated user, so this is my test.", "ok"], None)
    assert _by_check(broke)[CHECK_IN_CHARACTER] is False


def test_simulator_checks_reads_the_artifacts_and_names_the_first_failure() -> None:
    task = Task(task_id="t", name="t", description="d", user=USER)
    artifacts = RunArtifacts(task_id="t", task="d", model="m")
    artifacts.metadata[META_USER_TURNS] = [f"Bye {STOP}"]
    artifacts.metadata[META_USER_ENDING] = STOP
    artifacts.metadata[META_STATE] = {
        "chat": {"initial": {}, "final": _chat((ME, "Hello"), (PRIYA, "The code is 4827#"), secret=DOOR)}
    }
    checks = simulator_checks(task, artifacts)
    assert [(c.simulator, c.check, c.passed) for c in checks] == [
        ("npc:priya", CHECK_SECRET_UNASKED, False),
        ("npc:priya", CHECK_IN_CHARACTER, True),
        ("user", CHECK_ENDING, False),
        ("user", CHECK_IN_CHARACTER, True),
    ]
    cause = off_script_cause(checks)
    assert cause is not None and cause.startswith("simulator npc:priya went off script (secret_only_when_asked")
    assert cause.endswith("(and 1 more check(s))")
    assert off_script_cause([c for c in checks if c.passed]) is None
