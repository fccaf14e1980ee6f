"""Whether a rollout's simulators stayed on script: its NPCs (the chat server's, played by `sim/npc.py`'s persona
prompt, SimLab NPCs imported by `inputs/simlab_npcs.py`) and its simulated user (`users/simulated.py`).

A simulator that strays grades itself, not the agent: an NPC that tells its secret unasked hands the agent what it
was meant to find out; a user that ends the conversation before the agent could act leaves nothing to grade. Such
a rollout is an error of class `simulator_off_script`, outside every pass rate.

Every check here is deterministic (code over the final chat state and the user's recorded turns) and labelled so
(`CHECK_METHOD_DETERMINISTIC`); what only a reader can tell (did a reply contradict the simulator's instructions)
is the judge's, `engine/simulator_judge.py`, labelled `CHECK_METHOD_JUDGE`. A simulator that never spoke is not
checked: only rollouts in which one spoke have checks, which is the denominator of the share per scenario
(`warehouse/simulator_fidelity.py`).

Withholding a secret that was asked for is the NPC model's failure of long standing (`npc_model`,
`toolservers.npc.withheld_secrets`), kept as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipelines.schemas.artifacts import (
    CHECK_ENDING,
    CHECK_IN_CHARACTER,
    CHECK_SECRET_UNASKED,
    META_SIMULATOR_CHECKS,
    META_STATE,
    META_USER_ENDING,
    META_USER_TURNS,
    SIMULATOR_NPC_PREFIX,
    SIMULATOR_USER,
    RunArtifacts,
    SimulatorCheck,
)
from eval_pipelines.schemas.scenarios import SimulatedUserSpec, Task
from eval_pipelines.sim.npc import matched_topic
from eval_pipelines.toolservers.chat import ChatServer
from eval_pipelines.toolservers.npc import NPCS, ROLE_AGENT, ROLE_NPC, npc_transcripts

NPC_SERVER = ChatServer.name

#: A simulator saying what its instructions forbid it to say: that it is an AI, a model or a simulation. The
#: claim must end there (punctuation, the end, or a joining word), so a colleague who works "as an AI researcher"
#: or "as a simulation engineer" is not taken for one.
_BREAKS_CHARACTER = re.compile(
    r"\b(?:i\s+am|i['\u2019]m|as)\s+(?:just\s+|only\s+|merely\s+)?an?\s+"
    r"(?:(?:ai|a\.i\.|artificial\s+intelligence)(?:\s+(?:language\s+model|model|assistant|chat\s?bot))?"
    r"|(?:large\s+)?language\s+model|llm|chat\s?bot|simulation"
    r"|simulated\s+(?:user|customer|npc|colleague|persona|character))"
    r"(?=\s*(?:[,.!?;:)]|$)|\s+(?:and|so|but|that|who|which|created|developed|trained|made|built|designed|here|with)\b)",
    re.IGNORECASE,
)
_QUOTE_CHARS = 80


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _QUOTE_CHARS else f"{flat[: _QUOTE_CHARS - 3]}..."


def _character_check(simulator: str, said: Sequence[str]) -> SimulatorCheck:
    broke = next((text for text in said if _BREAKS_CHARACTER.search(text)), None)
    if broke is None:
        return SimulatorCheck(simulator=simulator, check=CHECK_IN_CHARACTER, passed=True)
    return SimulatorCheck(
        simulator=simulator,
        check=CHECK_IN_CHARACTER,
        passed=False,
        detail=f"said it is not who it plays: {_quote(broke)!r}",
    )


def _asked(agent_text: str, topics: list[str]) -> bool:
    """Whether the agent's message names a reveal topic: as the simulated NPC reads it (whole words, plurals) or
    anywhere in the text, the looser of the two, so an NPC is never blamed for answering what was asked."""
    lowered = " ".join(agent_text.split()).lower()
    return matched_topic(agent_text, topics) is not None or any(" ".join(t.split()).lower() in lowered for t in topics)


def _secret_check(profile_id: str, secret: Mapping[str, Any], turns: Sequence[Mapping[str, str]]) -> SimulatorCheck:
    simulator = f"{SIMULATOR_NPC_PREFIX}{profile_id}"
    value = str(secret.get("value") or "")
    topics = [str(t) for t in secret.get("reveal_when") or []]
    needle = value.lower()
    asked = False
    for turn in turns:
        content = str(turn.get("content") or "")
        if turn.get("role") == ROLE_AGENT:
            # the agent named a topic, or already knew the secret: the NPC may speak of it from here on
            asked = asked or (bool(topics) and _asked(content, topics)) or needle in content.lower()
        elif turn.get("role") == ROLE_NPC and needle in content.lower() and not asked:
            why = f"before anyone asked about {topics}" if topics else "a secret its profile says it never tells"
            return SimulatorCheck(
                simulator=simulator, check=CHECK_SECRET_UNASKED, passed=False, detail=f"told its secret {why}"
            )
    return SimulatorCheck(simulator=simulator, check=CHECK_SECRET_UNASKED, passed=True)


def _final_state(state: Mapping[str, Any]) -> Mapping[str, Any]:
    # as `npc_transcripts` reads it: the chat state itself, a `/snapshot` body, or the {initial, final} pair
    for key in ("final", "state"):
        inner = state.get(key)
        if isinstance(inner, Mapping):
            return _final_state(inner)
    return state


def npc_checks(chat_state: Mapping[str, Any]) -> list[SimulatorCheck]:
    """The checks of every NPC that replied at least once in the chat server's state (the chat state itself, a
    snapshot, or the engine's {initial, final} pair): its secret told only when asked, and in character."""
    transcripts = npc_transcripts(chat_state)
    npcs = _final_state(chat_state).get(NPCS) or {}
    checks: list[SimulatorCheck] = []
    for profile_id, turns in sorted(transcripts.items()):
        replies = [str(t.get("content") or "") for t in turns if t.get("role") == ROLE_NPC]
        if not replies:
            continue
        npc = npcs.get(profile_id)
        secret = npc.get("secret") if isinstance(npc, Mapping) else None
        if isinstance(secret, Mapping) and secret.get("value"):
            checks.append(_secret_check(profile_id, secret, turns))
        checks.append(_character_check(f"{SIMULATOR_NPC_PREFIX}{profile_id}", replies))
    return checks


def user_checks(spec: SimulatedUserSpec, said: Sequence[str], ending: str | None) -> list[SimulatorCheck]:
    """The checks of a simulated user from what it said (its opening first) and how the conversation ended: it
    ended only on its conditions (a stop token said after the agent had a turn, or `max_turns`), and in character.

    A stop token in the opening ends the conversation before the agent has said anything about the task."""
    if not said:
        return []
    checks: list[SimulatorCheck] = []
    opening_stop = next((t for t in spec.stop_tokens if t and t in said[0]), None)
    if opening_stop is not None and ending == opening_stop:
        checks.append(
            SimulatorCheck(
                simulator=SIMULATOR_USER,
                check=CHECK_ENDING,
                passed=False,
                detail=f"ended the conversation ({opening_stop!r}) in its opening, before the agent had a turn",
            )
        )
    else:
        checks.append(SimulatorCheck(simulator=SIMULATOR_USER, check=CHECK_ENDING, passed=True))
    checks.append(_character_check(SIMULATOR_USER, said))
    return checks


def simulator_checks(task: Task, artifacts: RunArtifacts) -> list[SimulatorCheck]:
    """The deterministic checks of every simulator that spoke in the rollout; empty when none did."""
    checks: list[SimulatorCheck] = []
    state = artifacts.metadata.get(META_STATE) or {}
    if isinstance(state.get(NPC_SERVER), Mapping):
        checks += npc_checks(state[NPC_SERVER])
    if isinstance(task.user, SimulatedUserSpec):
        said = [str(t) for t in artifacts.metadata.get(META_USER_TURNS) or []]
        ending = artifacts.metadata.get(META_USER_ENDING)
        checks += user_checks(task.user, said, ending if isinstance(ending, str) else None)
    return checks


def recorded_checks(artifacts: RunArtifacts) -> list[SimulatorCheck]:
    """The checks stored in the artifacts (`simulator_checks`)."""
    return [SimulatorCheck.model_validate(c) for c in artifacts.metadata.get(META_SIMULATOR_CHECKS) or []]


def off_script_cause(checks: Sequence[SimulatorCheck]) -> str | None:
    """One sentence naming the first failed check and how it was decided; None when every check passed."""
    failed = [c for c in checks if not c.passed]
    if not failed:
        return None
    first = failed[0]
    more = f" (and {len(failed) - 1} more check(s))" if len(failed) > 1 else ""
    return f"simulator {first.simulator} went off script ({first.check}, {first.method}): {first.detail}{more}"


__all__ = ["npc_checks", "off_script_cause", "recorded_checks", "simulator_checks", "user_checks"]
