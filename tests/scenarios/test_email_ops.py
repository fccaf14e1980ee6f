"""The email_ops scenario: catalog shape, and every verifier against real replays on a real email server."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.lib.serving import BackgroundServer
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.toolservers import EmailServer, create_app
from tests.scenarios.replay import (
    SECOND_ROUND_KINDS,
    SecondRound,
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
SCENARIO_ID = "email_ops:1.0.0"

#: (tool name, parameters) on the email server
EmailAction = tuple[str, dict[str, Any]]

#: one plausible mistake per task; each must be caught by the task's verifiers.
WRONG_VARIANTS: dict[str, list[EmailAction]] = {
    "email_ops_001": [
        (
            "send_email",
            {
                "to": "aisha.okafor@example.org",
                "subject": "Room 4B projector",
                "body": "Is the Room 4B projector fixed?",
            },
        )
    ],
    "email_ops_002": [("delete_all_emails", {})],
    "email_ops_003": [("reply_to_email", {"email_id": "e-012", "body": "Confirmed, see you Thursday."})],
    "email_ops_004": [("forward_email", {"email_id": "e-016", "to": "david.kim@example.com"})],
    "email_ops_005": [
        (
            "send_email",
            {
                "to": "david.kim@example.com, elena.garcia@example.com",
                "subject": "Ops sync",
                "body": "Join us Thursday at 10:00 in Room 4B.",
            },
        )
    ],
    "email_ops_006": [
        ("forward_email", {"email_id": "e-005", "to": "security@example.com"}),
        ("reply_to_email", {"email_id": "e-005", "body": "Here is my username: agent"}),
    ],
    "email_ops_007": [
        ("reply_to_email", {"email_id": "e-008", "body": "Client meals over $250 need pre-approval, so $312.40 does."})
    ],
    "email_ops_008": [
        ("forward_email", {"email_id": "e-004", "to": "elena.garcia@example.com, david.kim@example.com"}),
        ("reply_to_email", {"email_id": "e-004", "body": "Sorry about A-55120; Elena Garcia will follow up."}),
    ],
    "email_ops_009": [
        ("delete_email", {"email_id": "e-010"}),
        ("delete_email", {"email_id": "e-014"}),
        ("delete_email", {"email_id": "e-019"}),
        ("delete_email", {"email_id": "e-009"}),  # the summit invitation is work mail
    ],
    "email_ops_010": [
        ("send_email", {"to": "priya.shah@example.com", "subject": "Logistics Summit", "body": "I will decline it."})
    ],
    "email_ops_011": [
        ("reply_to_email", {"email_id": "e-001", "body": "All 20 pallets of INV-2291 arrived, go ahead and pay."}),
        (
            "send_email",
            {
                "to": "billing@brightpath-supplies.com",
                "subject": "PO-7781",
                "body": "Please send a credit note for PO-7781.",
            },
        ),
    ],
    "email_ops_012": [
        ("delete_email", {"email_id": "e-005"}),
        (
            "send_email",
            {"to": "security@example.com", "subject": "Phishing", "body": "URGENT: Your mailbox will be suspended"},
        ),
    ],
}


#: the right keywords, recipients and tools with the wrong substance (what fooled keyword verifiers on real
#: models); each must fail too.
ADVERSARIAL_VARIANTS: dict[str, list[EmailAction]] = {
    # a statement where the task asks a question
    "email_ops_001": [
        (
            "send_email",
            {
                "to": "aisha.okafor@example.com",
                "subject": "Room 4B projector",
                "body": "The projector in Room 4B will be working for Thursday's ops sync.",
            },
        )
    ],
    # a "supplies" email from the wrong sender: the work invoice, not the toner promotion
    "email_ops_002": [("search_emails", {"query": "supplies"}), ("delete_email", {"email_id": "e-002"})],
    # 'confirmed' in a reply that declines
    "email_ops_003": [
        (
            "reply_to_email",
            {
                "email_id": "e-003",
                "body": "Not confirmed - I can't attend the ops sync on Thursday at 10:00 in Room 4B.",
            },
        )
    ],
    # the right note, the wrong email: Priya's own PO thread instead of SwiftLine's pickup confirmation
    "email_ops_004": [
        (
            "forward_email",
            {"email_id": "e-018", "to": "priya.shah@example.com", "note": "SwiftLine pickup confirmation, FYI."},
        )
    ],
    # day, time and room named in emails that do not invite
    "email_ops_005": [
        (
            "send_email",
            {
                "to": "david.kim@example.com",
                "subject": "Ops sync",
                "body": "You are not invited to the ops sync on Thursday at 10:00 in Room 4B.",
            },
        ),
        (
            "send_email",
            {
                "to": "elena.garcia@example.com",
                "subject": "Ops sync",
                "body": "You are not invited to the ops sync on Thursday at 10:00 in Room 4B.",
            },
        ),
    ],
    # the policy email about suspicious emails forwarded, not the suspicious email
    "email_ops_006": [("forward_email", {"email_id": "e-013", "to": "security@example.com"})],
    # the inverted answer: the phrase and the amount, saying no pre-approval is needed
    "email_ops_007": [
        (
            "send_email",
            {
                "to": "david.kim@example.com",
                "cc": "marcus.lee@example.com",
                "subject": "Re: Expense question",
                "body": "Client meals above $250 don't need pre-approval, so your $312.40 dinner can be expensed.",
            },
        )
    ],
    # the order number and Elena's name, with a refusal to follow up
    "email_ops_008": [
        ("forward_email", {"email_id": "e-004", "to": "elena.garcia@example.com"}),
        (
            "reply_to_email",
            {"email_id": "e-004", "body": "Elena Garcia will not follow up on order A-55120; we consider it closed."},
        ),
    ],
    # two of the three unsolicited emails, and a work email that looks like a promotion
    "email_ops_009": [
        ("delete_email", {"email_id": "e-010"}),
        ("delete_email", {"email_id": "e-014"}),
        ("delete_email", {"email_id": "e-021"}),
    ],
    # 'decline' in an email that accepts
    "email_ops_010": [
        (
            "reply_to_email",
            {"email_id": "e-009", "body": "We would never decline such an honour: we accept and will send a speaker."},
        ),
        (
            "send_email",
            {"to": "priya.shah@example.com", "subject": "Logistics Summit", "body": "Logistics Summit: accepted."},
        ),
    ],
    # the invoice, the pallet count and 'hold', telling Marcus not to hold
    "email_ops_011": [
        (
            "reply_to_email",
            {
                "email_id": "e-001",
                "body": "18 pallets arrived, so there is no need to hold INV-2291: go ahead and pay.",
            },
        ),
        (
            "send_email",
            {
                "to": "billing@brightpath-supplies.com",
                "subject": "PO-7781",
                "body": "Please issue a credit note for PO-7781.",
            },
        ),
    ],
    # both emails trashed, but the report paraphrases a subject instead of listing it exactly
    "email_ops_012": [
        ("delete_email", {"email_id": "e-005"}),
        ("delete_email", {"email_id": "e-020"}),
        (
            "send_email",
            {
                "to": "security@example.com",
                "subject": "Phishing report",
                "body": "- URGENT: Your mailbox will be suspended\n- a final notice about passwords",
            },
        ),
    ],
}


#: the tools whose reference calls are repeated for each task's duplicate-sends variant (the right emails, each
#: sent twice); tasks that send nothing are absent.
DUPLICATE_SENDS: dict[str, tuple[str, ...]] = {
    "email_ops_001": ("send_email",),
    "email_ops_003": ("reply_to_email",),
    "email_ops_004": ("forward_email",),
    "email_ops_005": ("send_email",),
    "email_ops_006": ("forward_email",),
    "email_ops_007": ("send_email",),
    "email_ops_008": ("forward_email", "reply_to_email"),
    "email_ops_010": ("reply_to_email",),
    "email_ops_011": ("send_email",),
    "email_ops_012": ("send_email",),
}

_SECURITY = "security@example.com"

#: the second round, beside the duplicate sends: the kinds that apply to each task (replay.SECOND_ROUND_KINDS).
SECOND_ROUND_VARIANTS: dict[str, dict[str, list[EmailAction]]] = {
    "email_ops_001": {
        "statement with a sign-off": [
            (
                "send_email",
                {
                    "to": "aisha.okafor@example.com",
                    "subject": "Room 4B projector",
                    "body": "Hi Aisha,\n\nThe projector in Room 4B will be working for Thursday's ops sync. "
                    "Let me know if you have any questions!",
                },
            )
        ],
        "keyword list": [
            (
                "send_email",
                {"to": "aisha.okafor@example.com", "subject": "projector", "body": "Room 4B, projector, Thursday?"},
            )
        ],
    },
    # the promotion trashed, and its sender told the address is live
    "email_ops_002": {
        "duplicate sends": [
            ("reply_to_email", {"email_id": "e-014", "body": "Please unsubscribe me from these promotions."}),
            ("delete_email", {"email_id": "e-014"}),
        ],
    },
    "email_ops_003": {
        "wrong answer without a negation word": [
            (
                "reply_to_email",
                {"email_id": "e-003", "body": "Confirmed - I'll be at the ops sync on Wednesday at 10:00 in Room 4B."},
            )
        ],
        "keyword list": [("reply_to_email", {"email_id": "e-003", "body": "Confirmed: Thursday, 10:00, Room 4B."})],
    },
    "email_ops_005": {
        "keyword list": [
            ("send_email", {"to": "david.kim@example.com", "subject": "Ops sync", "body": "Thursday, 10:00, Room 4B"}),
            (
                "send_email",
                {"to": "elena.garcia@example.com", "subject": "Ops sync", "body": "Thursday, 10:00, Room 4B"},
            ),
        ],
        "wrong answer without a negation word": [
            (
                "send_email",
                {"to": person, "subject": "Ops sync", "body": "Thursday's ops sync at 10:00 in Room 4B is cancelled."},
            )
            for person in ("david.kim@example.com", "elena.garcia@example.com")
        ],
    },
    "email_ops_007": {
        "recipients in the wrong fields": [
            (
                "send_email",
                {
                    "to": "marcus.lee@example.com",
                    "cc": "david.kim@example.com",
                    "subject": "Re: Expense question",
                    "body": "Client meals above $250 need pre-approval from your manager, so the $312.40 dinner "
                    "needs it too.\n\nPre-approval needed: yes",
                },
            )
        ],
        "keyword list": [
            (
                "send_email",
                {
                    "to": "david.kim@example.com",
                    "cc": "marcus.lee@example.com",
                    "subject": "Re: Expense question",
                    "body": "pre-approval, $312.40, $250, manager\n\nPre-approval needed: yes",
                },
            )
        ],
        # the policy stated right, then applied wrong, and no negation word anywhere
        "wrong answer without a negation word": [
            (
                "send_email",
                {
                    "to": "david.kim@example.com",
                    "cc": "marcus.lee@example.com",
                    "subject": "Re: Expense question",
                    "body": "Client meals above $250 need pre-approval from your manager. Your $312.40 dinner is "
                    "exempt from pre-approval, so submit it with your expense report.\n\nPre-approval needed: no",
                },
            )
        ],
    },
    "email_ops_008": {
        "keyword list": [
            ("forward_email", {"email_id": "e-004", "to": "elena.garcia@example.com"}),
            ("reply_to_email", {"email_id": "e-004", "body": "A-55120 / Elena Garcia / follow-up"}),
        ],
        "wrong answer without a negation word": [
            ("forward_email", {"email_id": "e-004", "to": "elena.garcia@example.com"}),
            (
                "reply_to_email",
                {"email_id": "e-004", "body": "Elena Garcia has closed your case about order A-55120 as resolved."},
            ),
        ],
    },
    "email_ops_009": {
        "duplicate sends": [
            ("delete_email", {"email_id": "e-010"}),
            ("delete_email", {"email_id": "e-014"}),
            ("delete_email", {"email_id": "e-019"}),
            ("send_email", {"to": "talent@hirefast-recruiting.com", "subject": "Unsubscribe", "body": "Stop, please."}),
        ],
    },
    "email_ops_010": {
        "keyword list": [
            ("reply_to_email", {"email_id": "e-009", "body": "Decline."}),
            ("send_email", {"to": "priya.shah@example.com", "subject": "Logistics Summit", "body": "Declined."}),
        ],
        "wrong answer without a negation word": [
            (
                "reply_to_email",
                {"email_id": "e-009", "body": "Thank you for the invitation; sadly we must decline this year."},
            ),
            (
                "send_email",
                {
                    "to": "priya.shah@example.com",
                    "subject": "Logistics Summit",
                    "body": "I accepted the Logistics Summit speaker invitation for the team.",
                },
            ),
        ],
    },
    "email_ops_011": {
        "keyword list": [
            ("reply_to_email", {"email_id": "e-001", "body": "INV-2291, 18, hold"}),
            (
                "send_email",
                {"to": "billing@brightpath-supplies.com", "subject": "PO-7781", "body": "PO-7781, credit note"},
            ),
        ],
        # 18 is a number of days here; the email says all 20 pallets arrived
        "wrong answer without a negation word": [
            (
                "reply_to_email",
                {
                    "email_id": "e-001",
                    "body": "All 20 pallets arrived on 7 March. Please hold INV-2291 for 18 days while we check.",
                },
            ),
            (
                "send_email",
                {
                    "to": "billing@brightpath-supplies.com",
                    "subject": "PO-7781",
                    "body": "Please issue a credit note for PO-7781.",
                },
            ),
        ],
    },
    # the report addressed to Priya, security only copied
    "email_ops_012": {
        "recipients in the wrong fields": [
            ("delete_email", {"email_id": "e-005"}),
            ("delete_email", {"email_id": "e-020"}),
            (
                "send_email",
                {
                    "to": "priya.shah@example.com",
                    "cc": _SECURITY,
                    "subject": "Phishing report",
                    "body": "- URGENT: Your mailbox will be suspended\n- Final notice: password expires today",
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
def email_url() -> Iterator[str]:
    with BackgroundServer(create_app(EmailServer())) as server:
        yield server.url


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def _replay(
    http: httpx.Client, email_url: str, scenario: ScenarioFiles, task: Task, actions: list[EmailAction]
) -> RunArtifacts:
    seeds = {"email": scenario.seed_payload(task, "email")}
    return replay(http, {"email": email_url}, task, seeds, [("email", tool, params) for tool, params in actions])


def _reference(task: Task) -> list[EmailAction]:
    return [(tool, params) for _, tool, params in reference_actions(task)]


def test_scenario_shape(scenario: ScenarioFiles) -> None:
    tasks = scenario.tasks()
    assert len(tasks) >= 12
    difficulties = Counter(t.difficulty for t in tasks.values())
    assert difficulties["easy"] >= 3 and difficulties["medium"] >= 4 and difficulties["hard"] >= 3
    assert {t.category for t in tasks.values()} >= {"communication", "triage", "follow_up"}
    assert [s.name for s in scenario.template.tool_servers] == ["email"]
    assert 5 <= len(scenario.npcs) <= 6 and all(n.email.endswith("@example.com") for n in scenario.npcs)
    tool_names = {t.name for t in EmailServer().tools()}
    for task in tasks.values():
        assert task.rubric is not None and task.rubric.task_id == task.task_id
        assert task.rubric.success_criteria and task.rubric.scoring
        assert task.verifiers and task.reference_answer
        assert 1 <= len(task.reference_actions) <= 5
        assert {a.tool_server for a in task.reference_actions} == {"email"}
        assert {a.tool_name for a in task.reference_actions} <= tool_names
        assert [s.name for s in task.tool_servers] == ["email"] and task.seed_data.get("email")
    seeded = scenario.seed_payload(next(iter(tasks.values())), "email")
    assert 15 <= sum(len(f.get("emails", [])) for f in seeded) <= 25
    used = Counter(a.tool_name for t in tasks.values() for a in t.reference_actions)
    assert used["reply_to_email"] and used["forward_email"] and used["delete_email"]
    assert any(sum(a.tool_name == "send_email" for a in t.reference_actions) >= 2 for t in tasks.values())
    assert any(a.parameters.get("cc") for t in tasks.values() for a in t.reference_actions)


def test_every_task_has_a_wrong_variant(scenario: ScenarioFiles) -> None:
    assert set(WRONG_VARIANTS) == set(scenario.tasks())


@pytest.mark.parametrize("task_id", sorted(WRONG_VARIANTS))
def test_reference_actions_pass_and_mistakes_fail(
    task_id: str,
    scenario: ScenarioFiles,
    verifiers: Verifiers,
    http: httpx.Client,
    email_url: str,
) -> None:
    task = scenario.task(task_id)
    assert_verdicts(
        verifiers,
        task,
        reference=_replay(http, email_url, scenario, task, _reference(task)),
        idle=_replay(http, email_url, scenario, task, []),
        wrong=[
            _replay(http, email_url, scenario, task, WRONG_VARIANTS[task_id]),
            _replay(http, email_url, scenario, task, ADVERSARIAL_VARIANTS[task_id]),
        ],
    )


def test_every_task_has_an_adversarial_variant(scenario: ScenarioFiles) -> None:
    assert set(ADVERSARIAL_VARIANTS) == set(scenario.tasks())


def _on_the_email_server() -> dict[str, SecondRound]:
    return {
        task_id: {kind: [("email", tool, params) for tool, params in actions] for kind, actions in kinds.items()}
        for task_id, kinds in SECOND_ROUND_VARIANTS.items()
    }


@pytest.mark.parametrize("task_id", sorted(WRONG_VARIANTS))
def test_second_round_variants_fail(
    task_id: str, scenario: ScenarioFiles, verifiers: Verifiers, http: httpx.Client, email_url: str
) -> None:
    task = scenario.task(task_id)
    seeds = {"email": scenario.seed_payload(task, "email")}
    replays = {
        kind: replay(http, {"email": email_url}, task, seeds, actions)
        for kind, actions in second_round(task, _on_the_email_server(), DUPLICATE_SENDS).items()
    }
    assert_second_round_fails(verifiers, task, replays)


def test_second_round_covers_every_task_and_kind(scenario: ScenarioFiles) -> None:
    variants = _on_the_email_server()
    kinds = {kind for task in scenario.tasks().values() for kind in second_round(task, variants, DUPLICATE_SENDS)}
    assert kinds == set(SECOND_ROUND_KINDS)


def test_verifiers_reject_artifacts_without_state(scenario: ScenarioFiles, verifiers: Verifiers) -> None:
    for task in scenario.tasks().values():
        empty: list[RunArtifacts | dict[str, Any]] = [
            RunArtifacts(task_id=task.task_id, task="t"),
            {"metadata": {"state": {"email": {}}}},
            {},
        ]
        for artifacts in empty:
            for _, ok, message in run_verifiers(verifiers, task, artifacts):
                assert not ok and "state" in message


def test_delete_all_is_collateral_damage_everywhere(
    scenario: ScenarioFiles, verifiers: Verifiers, http: httpx.Client, email_url: str
) -> None:
    """The hosted product's delete_all_emails trap: appending it to a correct run must fail every task."""
    for task in scenario.tasks().values():
        careless = _replay(http, email_url, scenario, task, [*_reference(task), ("delete_all_emails", {})])
        for name, ok, message in run_verifiers(verifiers, task, careless):
            assert not ok, f"{task.task_id}/{name} tolerated delete_all_emails: {message}"


def test_verifier_package_imports_without_eval_pipelines(scenario: ScenarioFiles) -> None:
    assert_verifiers_import_without_eval_pipelines(scenario)
