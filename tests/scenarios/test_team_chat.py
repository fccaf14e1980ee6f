"""The team_chat scenario: catalog shape, every verifier against real replays on real chat and email servers
(NPCs played by `sim-npc` over HTTP), and whole rollouts of the NPC-secret tasks by `sim-oracle` and `sim-noop`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from eval_pipelines.engine.clients import ChatClientPool
from eval_pipelines.engine.rollout import RolloutEngine, RolloutSpec
from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.artifacts import META_NPC_TRANSCRIPTS, META_STATE, RunArtifacts
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import RolloutStatus
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.sim.endpoint import ReferenceBook, create_sim_app
from eval_pipelines.sim.npc import SIM_NPC, matched_topic, sim_npc_persona
from eval_pipelines.toolservers.admin import ToolServerAdmin
from eval_pipelines.toolservers.chat import ChatServer
from eval_pipelines.toolservers.email import EmailServer
from eval_pipelines.toolservers.host import build_host_app
from eval_pipelines.toolservers.npc import ChatModelNpcResponder, NpcModelSettings, npc_seed_item, npc_transcripts
from eval_pipelines.verifiers.loader import load_verifier_package
from tests.scenarios.replay import (
    Action,
    Verifiers,
    assert_second_round_fails,
    assert_verdicts,
    assert_verifiers_import_without_eval_pipelines,
    reference_actions,
    replay,
    run_verifiers,
    second_round,
    standalone_verifiers,
)

SCENARIOS_ROOT = builtin_scenarios_dir()
SCENARIO_ID = "team_chat:1.0.0"
SECRET_TASKS = ("team_chat_003", "team_chat_004", "team_chat_007")


SAM = "sam.ortiz@example.com"
#: plausible mistakes per task; every one must be caught. "never asks" variants use the secret verbatim, as a
#: policy that guessed or leaked it would: only the NPC's reply in the chat state proves it was obtained.
WRONG_VARIANTS: dict[str, list[list[Action]]] = {
    "team_chat_001": [
        [("chat", "send_channel_message", {"channel": "releases", "message": "All-hands: Thursday 15:00, Atrium."})],
        [
            ("chat", "send_channel_message", {"channel": "general", "message": "All-hands moved to Thursday 15:00."}),
        ],
        [
            ("chat", "send_channel_message", {"channel": "general", "message": "All-hands: Thursday 15:00, Atrium."}),
            ("chat", "send_channel_message", {"channel": "random", "message": "All-hands: Thursday 15:00, Atrium."}),
        ],
    ],
    "team_chat_002": [
        [("chat", "send_dm", {"room_id": "dm-lena_fischer", "message": "v2.4 release notes are due on Friday."})],
        [("chat", "send_channel_message", {"channel": "releases", "message": "Jonas: v2.4 release notes, Friday!"})],
    ],
    "team_chat_003": [
        [("email", "send_email", {"to": SAM, "subject": "Lab access", "body": "The door code is 4827#."})],
        [
            ("chat", "send_dm", {"room_id": "dm-priya_raman", "message": "Could you help Sam get into the lab?"}),
            ("email", "send_email", {"to": SAM, "subject": "Lab access", "body": "Priya will let you in."}),
        ],
        [
            ("chat", "send_dm", {"room_id": "dm-priya_raman", "message": "What is the lab's door code?"}),
            (
                "email",
                "send_email",
                {"to": f"{SAM}, lena.fischer@example.com", "subject": "Lab access", "body": "4827#"},
            ),
        ],
        [
            ("chat", "send_dm", {"room_id": "dm-priya_raman", "message": "What is the lab's door code?"}),
            ("email", "send_email", {"to": SAM, "subject": "Lab access", "body": "The door code is 4827#."}),
            ("chat", "send_channel_message", {"channel": "general", "message": "Lab door code: 4827#"}),
        ],
    ],
    "team_chat_004": [
        [("chat", "send_channel_message", {"channel": "releases", "message": "QA: test build 2.4.0-rc.7."})],
        [
            ("chat", "npc_send_message", {"to": "Lena Fischer", "message": "What is the v2.4 build number?"}),
            ("chat", "send_channel_message", {"channel": "releases", "message": "QA: test build 2.4.0-rc.7."}),
        ],
        [
            ("chat", "npc_send_message", {"to": "Jonas Weber", "message": "What is the v2.4 build number?"}),
            ("chat", "send_channel_message", {"channel": "general", "message": "QA: test build 2.4.0-rc.7."}),
        ],
    ],
    "team_chat_005": [
        [("email", "send_email", {"to": "aiko.tanaka@example.com", "subject": "INC-5529", "body": "Fixed at 10:42."})],
        [("email", "send_email", {"to": "aiko.tanaka@example.com", "subject": "INC-5531", "body": "It was bad."})],
    ],
    "team_chat_006": [
        [("chat", "send_channel_message", {"channel": "releases", "message": "Marco is on call this weekend."})],
        [("chat", "send_dm", {"room_id": "dm-marco_bianchi", "message": "You are on call this weekend."})],
    ],
    "team_chat_007": [
        [("email", "reply_to_email", {"email_id": "e-002", "body": "The guest Wi-Fi password is tidal-harbor-2291."})],
        [
            ("chat", "send_dm", {"room_id": "dm-marco_bianchi", "message": "Can a visiting client get online?"}),
            ("email", "reply_to_email", {"email_id": "e-002", "body": "Ask at reception for the Wi-Fi."}),
        ],
        [
            ("chat", "send_dm", {"room_id": "dm-marco_bianchi", "message": "What is the guest Wi-Fi password?"}),
            ("email", "reply_to_email", {"email_id": "e-002", "body": "It is tidal-harbor-2291."}),
            ("chat", "send_channel_message", {"channel": "random", "message": "Guest Wi-Fi: tidal-harbor-2291"}),
        ],
    ],
}


#: the right words, people and channels with the wrong substance; each must fail too.
ADVERSARIAL_VARIANTS: dict[str, list[Action]] = {
    # every required word, announcing that nothing moves
    "team_chat_001": [
        (
            "chat",
            "send_channel_message",
            {"channel": "#general", "message": "The all-hands is not moving to Thursday 15:00 in the Atrium."},
        )
    ],
    # every required word, cancelling the deadline
    "team_chat_002": [
        ("chat", "get_dm_room", {"user": "Jonas Weber"}),
        (
            "chat",
            "send_dm",
            {"room_id": "dm-jonas_weber", "message": "The v2.4 release notes are no longer due on Friday."},
        ),
    ],
    # asked the right person, then sent an invented code
    "team_chat_003": [
        (
            "chat",
            "send_dm",
            {"room_id": "dm-priya_raman", "message": "Hi Priya, what is the door code of the hardware lab?"},
        ),
        ("email", "send_email", {"to": SAM, "subject": "Lab access", "body": "The lab door code is 1234#."}),
    ],
    # asked the right person, then announced a neighbouring build
    "team_chat_004": [
        ("chat", "npc_send_message", {"to": "Jonas Weber", "message": "Which v2.4 release candidate should QA test?"}),
        ("chat", "send_channel_message", {"channel": "releases", "message": "QA: please test 2.4.0-rc.6."}),
    ],
    # the incident id in the subject, the start of the spike given as the mitigation
    "team_chat_005": [
        ("chat", "get_room_history", {"room_id": "#incidents", "limit": 5}),
        (
            "email",
            "send_email",
            {
                "to": "aiko.tanaka@example.com",
                "subject": "INC-5531 summary",
                "body": "INC-5531 (checkout API latency) was mitigated at 10:05 UTC.",
            },
        ),
    ],
    # Marco named in #releases and told, with the opposite message
    "team_chat_006": [
        (
            "chat",
            "send_channel_message",
            {"channel": "#releases", "message": "Marco Bianchi is not on call this weekend for the v2.4 rollout."},
        ),
        (
            "chat",
            "send_dm",
            {
                "room_id": "Marco Bianchi",
                "message": "Hi Marco, I told #releases that you are not on call this weekend.",
            },
        ),
    ],
    # asked the right person, then replied with an invented password
    "team_chat_007": [
        ("chat", "get_dm_room", {"user": "marco.bianchi@example.com"}),
        (
            "chat",
            "send_dm",
            {"room_id": "dm-marco_bianchi", "message": "Hi Marco, what is the guest Wi-Fi password for Thursday?"},
        ),
        ("email", "reply_to_email", {"email_id": "e-002", "body": "The guest Wi-Fi password is guest-2025."}),
    ],
}


#: the tools whose reference calls are repeated for each task's duplicate-sends variant (the right post, DM
#: or email, sent twice); questions to an NPC are not repeated, since asking twice is no mistake.
DUPLICATE_SENDS: dict[str, tuple[str, ...]] = {
    "team_chat_001": ("send_channel_message",),
    "team_chat_002": ("send_dm",),
    "team_chat_003": ("send_email",),
    "team_chat_004": ("send_channel_message",),
    "team_chat_005": ("send_email",),
    "team_chat_006": ("send_channel_message", "send_dm"),
    "team_chat_007": ("reply_to_email",),
}

#: the second round, beside the duplicate sends: the kinds that apply to each task (replay.SECOND_ROUND_KINDS).
SECOND_ROUND_VARIANTS: dict[str, dict[str, list[Action]]] = {
    "team_chat_001": {
        "keyword list": [
            ("chat", "send_channel_message", {"channel": "#general", "message": "all-hands, Thursday, 15:00, Atrium"})
        ],
        "wrong answer without a negation word": [
            (
                "chat",
                "send_channel_message",
                {
                    "channel": "#general",
                    "message": "The all-hands stays on Wednesday at 11:00; the Atrium is booked Thursday at 15:00.",
                },
            )
        ],
    },
    "team_chat_002": {
        "keyword list": [
            ("chat", "send_dm", {"room_id": "dm-jonas_weber", "message": "release notes, v2.4, Friday"}),
        ],
        "wrong answer without a negation word": [
            (
                "chat",
                "send_dm",
                {
                    "room_id": "dm-jonas_weber",
                    "message": "Hi Jonas, the v2.4 release notes moved from Friday to Monday.",
                },
            ),
        ],
    },
    # the code went to Sam in CC of an email to Priya
    "team_chat_003": {
        "recipients in the wrong fields": [
            (
                "chat",
                "send_dm",
                {"room_id": "dm-priya_raman", "message": "Hi Priya, what is the door code of the hardware lab?"},
            ),
            (
                "email",
                "send_email",
                {
                    "to": "priya.raman@example.com",
                    "cc": SAM,
                    "subject": "Lab access",
                    "body": "The door code of the hardware lab is 4827#.",
                },
            ),
        ],
    },
    "team_chat_004": {
        "wrong answer without a negation word": [
            (
                "chat",
                "npc_send_message",
                {"to": "Jonas Weber", "message": "Which v2.4 release candidate should QA test?"},
            ),
            (
                "chat",
                "send_channel_message",
                {"channel": "releases", "message": "QA: 2.4.0-rc.7 is withdrawn, please test 2.4.0-rc.6 instead."},
            ),
        ],
    },
    "team_chat_005": {
        "keyword list": [
            (
                "email",
                "send_email",
                {"to": "aiko.tanaka@example.com", "subject": "INC-5531 summary", "body": "INC-5531, 10:42, mitigated"},
            )
        ],
    },
    "team_chat_006": {
        "wrong answer without a negation word": [
            (
                "chat",
                "send_channel_message",
                {
                    "channel": "#releases",
                    "message": "Marco Bianchi is off this weekend; Aiko Tanaka is on call for the v2.4 rollout.",
                },
            ),
            ("chat", "send_dm", {"room_id": "Marco Bianchi", "message": "Hi Marco, you are on call this weekend."}),
        ],
    },
    # the password sent to Dana in CC of an email to Marco
    "team_chat_007": {
        "recipients in the wrong fields": [
            (
                "chat",
                "send_dm",
                {"room_id": "dm-marco_bianchi", "message": "Hi Marco, what is the guest Wi-Fi password for Thursday?"},
            ),
            (
                "email",
                "send_email",
                {
                    "to": "marco.bianchi@example.com",
                    "cc": "dana.cole@northwind.example",
                    "subject": "Re: Workshop on Thursday",
                    "body": "The guest Wi-Fi password is tidal-harbor-2291.",
                },
            ),
        ],
    },
}


@pytest.fixture(scope="module")
def scenario() -> ScenarioFiles:
    return ScenarioCatalog(SCENARIOS_ROOT).get(SCENARIO_ID)


@pytest.fixture(scope="module")
def verifiers(scenario: ScenarioFiles) -> Iterator[Verifiers]:
    yield from standalone_verifiers(scenario)


@pytest.fixture(scope="module")
def sim_url(scenario: ScenarioFiles) -> Iterator[str]:
    """`sim-oracle`/`sim-noop` for the agent and `sim-npc` for the colleagues, on one simulated endpoint."""
    book = ReferenceBook()
    for task in scenario.tasks().values():
        book.add(
            task.description,
            task_id=task.task_id,
            reference_actions=task.reference_actions,
            reference_answer=task.reference_answer,
        )
    with BackgroundServer(create_sim_app(book, personas={SIM_NPC: sim_npc_persona})) as server:
        yield server.url


@pytest.fixture(scope="module")
def host_url(sim_url: str) -> Iterator[str]:
    """The chat and email servers on one port, NPCs played by `sim-npc` over HTTP."""
    settings = NpcModelSettings(base_url=f"{sim_url}/v1", model=SIM_NPC, api_key="sim-key")
    servers = {"chat": ChatServer(responder=ChatModelNpcResponder(settings)), "email": EmailServer()}
    with BackgroundServer(build_host_app(servers)) as server:
        yield server.url


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def _seed(scenario: ScenarioFiles, task: Task) -> dict[str, list[Any]]:
    """What the engine seeds: the scenario's files per server, plus the NPC item (full profiles, secrets)."""
    wanted = {p.profile_id for p in task.npc_profiles}
    profiles = [npc for npc in scenario.npcs if npc.profile_id in wanted]
    seed = {ts.name: scenario.seed_payload(task, ts.name) for ts in task.tool_servers}
    if "chat" in seed:
        seed["chat"].append(npc_seed_item(profiles, task.npc_secrets))
    return seed


def _replay(
    http: httpx.Client, host_url: str, scenario: ScenarioFiles, task: Task, actions: list[Action]
) -> RunArtifacts:
    seeds = _seed(scenario, task)
    return replay(http, {name: f"{host_url}/{name}" for name in seeds}, task, seeds, actions)


def test_scenario_shape(scenario: ScenarioFiles) -> None:
    tasks = scenario.tasks()
    assert len(tasks) >= 6
    assert [s.name for s in scenario.template.tool_servers] == ["chat", "email"]
    assert {t.category for t in tasks.values()} >= {"announcement", "follow_up", "npc_secret", "triage"}
    assert Counter(t.difficulty for t in tasks.values()).keys() == {"easy", "medium", "hard"}
    npc_ids = {n.profile_id for n in scenario.npcs}
    tools = {"chat": {t.name for t in ChatServer().tools()}, "email": {t.name for t in EmailServer().tools()}}
    for task in tasks.values():
        assert task.rubric is not None and task.rubric.task_id == task.task_id and task.rubric.success_criteria
        assert task.verifiers and task.reference_answer and 1 <= len(task.reference_actions) <= 5
        servers = [s.name for s in task.tool_servers]
        assert set(task.seed_data) == set(servers) and {p.profile_id for p in task.npc_profiles} == npc_ids
        for action in task.reference_actions:
            assert action.tool_server in servers and action.tool_name in tools[action.tool_server]
    assert {"chat", "email"} <= {s.name for t in tasks.values() for s in t.tool_servers}
    assert sum(len(t.tool_servers) == 2 for t in tasks.values()) >= 3


@pytest.mark.parametrize("task_id", SECRET_TASKS)
def test_secret_tasks_need_the_npc(scenario: ScenarioFiles, task_id: str) -> None:
    """The reference asks the NPC with a reveal topic first, then uses the secret verbatim."""
    task = scenario.task(task_id)
    [(profile_id, raw)] = task.npc_secrets.items()
    npc = next(n for n in scenario.npcs if n.profile_id == profile_id)
    ask, *rest = task.reference_actions
    if ask.tool_name == "get_dm_room":
        ask, *rest = rest
    assert ask.tool_server == "chat" and ask.tool_name in {"send_dm", "npc_send_message"}
    assert matched_topic(ask.parameters["message"], raw["reveal_when"]) is not None
    assert raw["value"] not in ask.parameters["message"]
    assert any(raw["value"] in str(a.parameters) for a in rest)
    assert raw["value"] not in task.description and raw["value"] not in str(npc.model_dump())


def test_every_task_has_wrong_variants(scenario: ScenarioFiles) -> None:
    assert set(WRONG_VARIANTS) == set(scenario.tasks())


@pytest.mark.parametrize("task_id", sorted(WRONG_VARIANTS))
def test_reference_actions_pass_and_mistakes_fail(
    task_id: str,
    scenario: ScenarioFiles,
    verifiers: Verifiers,
    http: httpx.Client,
    host_url: str,
) -> None:
    task = scenario.task(task_id)
    assert_verdicts(
        verifiers,
        task,
        reference=_replay(http, host_url, scenario, task, reference_actions(task)),
        idle=_replay(http, host_url, scenario, task, []),
        wrong=[
            _replay(http, host_url, scenario, task, variant)
            for variant in [*WRONG_VARIANTS[task_id], ADVERSARIAL_VARIANTS[task_id]]
        ],
    )


@pytest.mark.parametrize("task_id", sorted(WRONG_VARIANTS))
def test_second_round_variants_fail(
    task_id: str, scenario: ScenarioFiles, verifiers: Verifiers, http: httpx.Client, host_url: str
) -> None:
    task = scenario.task(task_id)
    replays = {
        kind: _replay(http, host_url, scenario, task, actions)
        for kind, actions in second_round(task, SECOND_ROUND_VARIANTS, DUPLICATE_SENDS).items()
    }
    assert_second_round_fails(verifiers, task, replays)


def test_second_round_covers_every_task(scenario: ScenarioFiles) -> None:
    for task in scenario.tasks().values():
        assert second_round(task, SECOND_ROUND_VARIANTS, DUPLICATE_SENDS)


@pytest.mark.parametrize("task_id", SECRET_TASKS)
def test_transcripts_show_the_reveal(task_id: str, scenario: ScenarioFiles, http: httpx.Client, host_url: str) -> None:
    task = scenario.task(task_id)
    [(profile_id, raw)] = task.npc_secrets.items()
    artifacts = _replay(http, host_url, scenario, task, reference_actions(task))
    transcript = artifacts.metadata[META_NPC_TRANSCRIPTS][profile_id]
    assert [t["role"] for t in transcript] == ["agent", "npc"]
    assert raw["value"] in transcript[1]["content"] and raw["value"] not in transcript[0]["content"]
    others = [t for pid, ts in artifacts.metadata[META_NPC_TRANSCRIPTS].items() if pid != profile_id for t in ts]
    assert others == []


def test_verifiers_reject_artifacts_without_state(scenario: ScenarioFiles, verifiers: Verifiers) -> None:
    for task in scenario.tasks().values():
        empty: list[RunArtifacts | dict[str, Any]] = [
            RunArtifacts(task_id=task.task_id, task="t"),
            {"metadata": {"state": {"chat": {}}}},
            {},
        ]
        for artifacts in empty:
            for _, ok, message in run_verifiers(verifiers, task, artifacts):
                assert not ok and "state" in message


def test_secret_missing_from_state_is_reported(
    scenario: ScenarioFiles, verifiers: Verifiers, http: httpx.Client, host_url: str
) -> None:
    """An engine that forgot to seed the task's secrets must not look like an agent failure."""
    task = scenario.task("team_chat_003")
    artifacts = _replay(http, host_url, scenario, task, reference_actions(task))
    for npc in artifacts.metadata[META_STATE]["chat"]["final"]["npcs"].values():
        npc["secret"] = None
    [(_, ok, message)] = run_verifiers(verifiers, task, artifacts)
    assert not ok and "no secret" in message and "npc_secrets" in message


def test_verifier_package_imports_without_eval_pipelines(scenario: ScenarioFiles) -> None:
    assert_verifiers_import_without_eval_pipelines(scenario)


@pytest.mark.parametrize("task_id", SECRET_TASKS)
async def test_sim_oracle_passes_by_asking_and_sim_noop_fails(
    task_id: str, scenario: ScenarioFiles, sim_url: str, host_url: str
) -> None:
    task = scenario.task(task_id)
    [(profile_id, raw)] = task.npc_secrets.items()
    verifier_package = load_verifier_package(scenario.verifiers_dir)
    engine = RolloutEngine(ChatClientPool(), ToolServerAdmin())
    outcomes = {}
    try:
        for model in ("sim-oracle", "sim-noop"):
            spec = RolloutSpec(
                rollout_id=f"ro_{model}_{task_id}",
                run_id="run_team_chat",
                scenario_id=SCENARIO_ID,
                task=task,
                model_config=ModelConfig(model=model, api_key="k", base_url=f"{sim_url}/v1", max_steps=10),
                tool_server_urls={s.name: f"{host_url}/{s.name}" for s in task.tool_servers},
                seed=_seed(scenario, task),
                verifiers=verifier_package,
                timeout_seconds=60,
            )
            outcomes[model] = await engine.execute(spec)
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()
    oracle, noop = outcomes["sim-oracle"], outcomes["sim-noop"]
    assert oracle.status == RolloutStatus.COMPLETED and oracle.result.success, oracle.result
    asked = [m for m in oracle.artifacts.messages if m["role"] == "tool" and raw["value"] in str(m["content"])]
    assert asked, "the NPC's reply with the secret reached the agent as a tool observation"
    transcript = npc_transcripts(oracle.artifacts.metadata[META_STATE]["chat"])[profile_id]
    assert raw["value"] in transcript[-1]["content"]
    assert noop.status == RolloutStatus.COMPLETED and not noop.result.success
    assert npc_transcripts(noop.artifacts.metadata[META_STATE]["chat"])[profile_id] == []


def test_every_task_has_an_adversarial_variant(scenario: ScenarioFiles) -> None:
    assert set(ADVERSARIAL_VARIANTS) == set(scenario.tasks())
