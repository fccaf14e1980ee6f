"""The simulated models over real HTTP: a hand-built reference book (and the real catalog when present),
served by BackgroundServer and driven through ChatClient by a miniature agent loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError
from eval_pipelines.lib.serving import BackgroundServer, free_port
from eval_pipelines.llm import (
    ChatClient,
    ChatCompletion,
    ChatMessage,
    ChatRequest,
    LLMInvalidModelError,
    ToolSpec,
)
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.tools import ToolCall
from eval_pipelines.sim.endpoint import (
    EARLY_STOP_REPLY,
    GENERIC_TEXT,
    NOOP_REPLY,
    SIM_USER,
    SIMULATED_MODELS,
    UNKNOWN_TASK_REPLY,
    WRONG_ADDRESS,
    ReferenceBook,
    create_sim_app,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

EMAIL_TASK = """Send the Q3 report to alice@example.com,
   tell Bob on chat that it went out, and book a Q3 review meeting."""
EMAIL_ACTIONS = [
    ToolCall(
        tool_server="email",
        tool_name="send_email",
        parameters={"to": "alice@example.com", "subject": "Q3 report", "body": "Attached is the Q3 report."},
    ),
    ToolCall(tool_server="chat", tool_name="send_dm", parameters={"to": "bob", "message": "The Q3 report went out."}),
    ToolCall(
        tool_server="calendar",
        tool_name="create_event",
        parameters={"title": "Q3 review", "start": "2025-01-10T10:00:00"},
    ),
]
EMAIL_ANSWER = "I sent the Q3 report to Alice, told Bob, and booked the Q3 review."
ANSWER_ONLY_TASK = "What is six times seven? Answer with the number only."


def tool_specs(actions: list[ToolCall]) -> list[ToolSpec]:
    seen: dict[str, ToolSpec] = {}
    for action in actions:
        spec = ToolSpec.for_tool(action.tool_server, action.tool_name, description="test tool")
        seen.setdefault(spec.function.name, spec)
    return list(seen.values())


EMAIL_TOOLS = tool_specs(EMAIL_ACTIONS)


@dataclass
class Episode:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    final_text: str | None = None
    completions: list[ChatCompletion] = field(default_factory=list)


async def run_episode(
    client: ChatClient,
    model: str,
    instruction: str,
    *,
    tools: list[ToolSpec] | None = None,
    user: str | None = None,
    max_turns: int = 10,
    logprobs: bool | None = None,
) -> Episode:
    """The reference loop in miniature: every tool call gets an "ok" result; a text reply ends the episode."""
    messages = [ChatMessage.system("You are a helpful agent."), ChatMessage.user(instruction)]
    episode = Episode()
    for _ in range(max_turns):
        completion = await client.complete(
            ChatRequest(model=model, messages=messages, tools=tools, user=user, logprobs=logprobs)
        )
        episode.completions.append(completion)
        message = completion.message
        messages.append(message)
        if not message.tool_calls:
            episode.final_text = message.content
            return episode
        for call in message.tool_calls:
            episode.calls.append((call.function.name, call.parsed_arguments()))
            messages.append(ChatMessage.tool(call.id, "ok"))
    return episode


def reference_calls(actions: list[ToolCall]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{a.tool_server}__{a.tool_name}", a.parameters) for a in actions]


@pytest.fixture(scope="module")
def book() -> ReferenceBook:
    book = ReferenceBook()
    book.add(EMAIL_TASK, task_id="email_q3", reference_actions=EMAIL_ACTIONS, reference_answer=EMAIL_ANSWER)
    book.add(ANSWER_ONLY_TASK, task_id="arith", reference_answer="42")
    return book


@pytest.fixture(scope="module")
def sim_server(book: ReferenceBook) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_sim_app(book)) as server:
        yield server


@pytest.fixture
async def llm(sim_server: BackgroundServer) -> Any:
    async with ChatClient(sim_server.url + "/v1", "sk-sim-test-key-000000000000") as client:
        yield client


async def test_oracle_follows_every_reference_action_then_answers(llm: ChatClient) -> None:
    episode = await run_episode(llm, "sim-oracle", EMAIL_TASK, tools=EMAIL_TOOLS, user="rollout-1")

    assert episode.calls == reference_calls(EMAIL_ACTIONS)
    assert episode.final_text == EMAIL_ANSWER
    tool_turns = [c for c in episode.completions if c.tool_calls]
    assert [c.tool_calls[0].id for c in tool_turns] == ["call_0", "call_1", "call_2"]
    assert all(len(c.tool_calls) == 1 and c.choices[0].finish_reason == "tool_calls" for c in tool_turns)
    last = episode.completions[-1]
    assert last.choices[0].finish_reason == "stop"
    for completion in episode.completions:
        assert completion.system_fingerprint == "simulated"
        assert completion.model == "sim-oracle"
        assert completion.usage is not None
        assert completion.usage.prompt_tokens >= 1 and completion.usage.completion_tokens >= 1
        assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    # The prompt grows with the conversation, and so does the estimate.
    prompts = [c.usage.prompt_tokens for c in episode.completions if c.usage]
    assert prompts == sorted(prompts) and prompts[0] < prompts[-1]


async def test_oracle_matches_instruction_despite_whitespace_and_answers_text_only_tasks(llm: ChatClient) -> None:
    reflowed = " ".join(EMAIL_TASK.split()).replace(", ", ",\n\t")
    episode = await run_episode(llm, "sim-oracle", reflowed, tools=EMAIL_TOOLS)
    assert episode.calls == reference_calls(EMAIL_ACTIONS)

    answer_only = await run_episode(llm, "sim-oracle", ANSWER_ONLY_TASK, tools=EMAIL_TOOLS)
    assert answer_only.calls == [] and answer_only.final_text == "42"


async def test_oracle_finds_an_instruction_wrapped_by_the_agent(llm: ChatClient) -> None:
    wrapped = f"Task:\n{EMAIL_TASK}\n\nUse the tools available to you."
    episode = await run_episode(llm, "sim-oracle", wrapped, tools=EMAIL_TOOLS)
    assert episode.calls == reference_calls(EMAIL_ACTIONS)


async def test_unknown_instruction_gets_a_plain_reply_without_tools(llm: ChatClient) -> None:
    for model in ("sim-oracle", "sim-noisy"):
        episode = await run_episode(llm, model, "Water the office plants.", tools=EMAIL_TOOLS)
        assert episode.calls == []
        assert episode.final_text == UNKNOWN_TASK_REPLY


async def test_missing_tool_makes_the_model_answer_instead_of_calling_it(llm: ChatClient) -> None:
    without_calendar = [t for t in EMAIL_TOOLS if not t.function.name.startswith("calendar__")]
    episode = await run_episode(llm, "sim-oracle", EMAIL_TASK, tools=without_calendar)
    assert [name for name, _ in episode.calls] == ["email__send_email", "chat__send_dm"]
    assert episode.final_text is not None and "calendar__create_event" in episode.final_text

    no_tools = await run_episode(llm, "sim-oracle", EMAIL_TASK, tools=None)
    assert no_tools.calls == [] and no_tools.final_text != EMAIL_ANSWER


async def test_noop_never_calls_tools(llm: ChatClient) -> None:
    for user in ("a", "b", None):
        episode = await run_episode(llm, "sim-noop", EMAIL_TASK, tools=EMAIL_TOOLS, user=user)
        assert episode.calls == []
        assert episode.final_text == NOOP_REPLY
        assert len(episode.completions) == 1


def _outcome(episode: Episode) -> tuple[Any, ...]:
    return (tuple((name, json.dumps(args, sort_keys=True)) for name, args in episode.calls), episode.final_text)


async def test_noisy_is_reproducible_per_user_and_differs_across_users(llm: ChatClient) -> None:
    outcomes = {}
    for index in range(24):
        user = f"rollout-{index}"
        first = await run_episode(llm, "sim-noisy", EMAIL_TASK, tools=EMAIL_TOOLS, user=user)
        again = await run_episode(llm, "sim-noisy", EMAIL_TASK, tools=EMAIL_TOOLS, user=user)
        assert _outcome(first) == _outcome(again), f"{user} did not replay identically"
        outcomes[user] = _outcome(first)

    oracle = _outcome(await run_episode(llm, "sim-oracle", EMAIL_TASK, tools=EMAIL_TOOLS))
    assert len(set(outcomes.values())) >= 3
    assert any(outcome != oracle for outcome in outcomes.values())
    assert any(outcome == oracle for outcome in outcomes.values())

    # No `user`: seeded from the instruction alone, still deterministic.
    anonymous = [_outcome(await run_episode(llm, "sim-noisy", EMAIL_TASK, tools=EMAIL_TOOLS)) for _ in range(2)]
    assert anonymous[0] == anonymous[1]


async def test_noisy_completion_rate_is_between_the_extremes(sim_server: BackgroundServer) -> None:
    async with ChatClient(sim_server.url + "/v1", None, max_concurrency=8) as client:
        episodes = []
        for batch in range(0, 200, 25):
            episodes += await _gather(
                run_episode(client, "sim-noisy", EMAIL_TASK, tools=EMAIL_TOOLS, user=f"sweep-{i}")
                for i in range(batch, batch + 25)
            )
    expected = reference_calls(EMAIL_ACTIONS)
    completed = [e for e in episodes if e.calls == expected and e.final_text == EMAIL_ANSWER]
    rate = len(completed) / len(episodes)
    assert 0.15 < rate < 0.85, rate

    failed = [e for e in episodes if e not in completed]
    all_args = [args for e in failed for _, args in e.calls]
    # Every kind of deviation shows up: a wrong recipient, a generic text, an early stop, a skipped action.
    assert any(WRONG_ADDRESS in args.values() for args in all_args)
    assert any(GENERIC_TEXT in args.values() for args in all_args)
    assert any(e.final_text == EARLY_STOP_REPLY for e in failed)
    assert any(e.final_text == EMAIL_ANSWER and len(e.calls) < len(expected) for e in failed)


async def _gather(coros: Any) -> list[Episode]:
    return list(await asyncio.gather(*coros))


async def test_unknown_model_is_an_invalid_model_error(llm: ChatClient) -> None:
    with pytest.raises(LLMInvalidModelError) as info:
        await llm.complete(ChatRequest(model="gpt-imaginary", messages=[ChatMessage.user(EMAIL_TASK)]))
    assert info.value.status == 404
    assert info.value.error_type.value == "invalid_model"
    assert "gpt-imaginary" in str(info.value)


async def test_logprobs_are_returned_for_text_replies_when_asked(llm: ChatClient) -> None:
    asked = await run_episode(llm, "sim-oracle", ANSWER_ONLY_TASK, logprobs=True)
    logprobs = asked.completions[-1].choices[0].logprobs
    assert logprobs is not None and logprobs.content
    assert "".join(t.token for t in logprobs.content) == "42"
    assert all(t.logprob <= 0 for t in logprobs.content)

    longer = await run_episode(llm, "sim-noop", EMAIL_TASK, logprobs=True)
    tokens = longer.completions[-1].choices[0].logprobs
    assert tokens is not None and tokens.content is not None
    assert "".join(t.token for t in tokens.content) == NOOP_REPLY

    top = await llm.complete(
        ChatRequest(model="sim-noop", messages=[ChatMessage.user("hi")], logprobs=True, top_logprobs=3)
    )
    first = top.choices[0].logprobs
    assert first is not None and first.content is not None
    assert len(first.content[0].top_logprobs) == 3
    assert first.content[0].top_logprobs[0].token == first.content[0].token

    not_asked = await run_episode(llm, "sim-oracle", ANSWER_ONLY_TASK)
    assert not_asked.completions[-1].choices[0].logprobs is None


async def test_both_path_forms_models_listing_and_errors_on_the_wire(sim_server: BackgroundServer) -> None:
    canary = "sk-canary-sim-7f3a9c0e55d14b2a"
    body = {"model": "sim-oracle", "messages": [{"role": "user", "content": ANSWER_ONLY_TASK}]}
    async with httpx.AsyncClient(base_url=sim_server.url) as http:
        for path in ("/v1/chat/completions", "/chat/completions"):
            response = await http.post(path, json=body, headers={"Authorization": f"Bearer {canary}"})
            assert response.status_code == 200
            assert response.json()["choices"][0]["message"]["content"] == "42"
            assert canary not in response.text
        unauthenticated = await http.post("/v1/chat/completions", json=body)
        assert unauthenticated.status_code == 200

        for path in ("/v1/models", "/models"):
            listing = (await http.get(path)).json()
            # the agents, then the personas: sim-user plays multi-turn tasks' users
            assert [m["id"] for m in listing["data"]] == [*SIMULATED_MODELS, SIM_USER]

        missing = await http.post("/v1/chat/completions", json={**body, "model": "x"})
        assert missing.status_code == 404
        assert missing.json() == {
            "error": {
                "message": "model 'x' not found",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        }
        garbage = await http.post("/v1/chat/completions", content=b"{not json", headers={"Authorization": canary})
        assert garbage.status_code == 400 and canary not in garbage.text
        no_user = await http.post("/v1/chat/completions", json={"model": "sim-noop", "messages": []})
        assert no_user.status_code == 400 and "error" in no_user.json()


async def test_client_from_model_config_reaches_the_sim(sim_server: BackgroundServer) -> None:
    cfg = ModelConfig(model="sim-oracle", base_url=sim_server.url + "/v1/", api_key="sk-canary-cfg-0000000000000000")
    async with ChatClient.from_model_config(cfg) as client:
        assert "sk-canary-cfg" not in repr(client)
        models = await client.list_models()
        assert models == [*SIMULATED_MODELS, SIM_USER]
        episode = await run_episode(client, cfg.model, EMAIL_TASK, tools=EMAIL_TOOLS)
    assert episode.calls == reference_calls(EMAIL_ACTIONS)


def _write_scenario(root: Path, folder: str, scenario_id: str, task_id: str, instruction: str) -> None:
    base = root / folder
    (base / "tasks").mkdir(parents=True)
    (base / "template.json").write_text(
        json.dumps({"scenario_id": scenario_id, "name": folder, "tool_servers": [{"name": "email"}]})
    )
    task = {
        "task_id": task_id,
        "name": task_id,
        "description": instruction,
        "tool_servers": [{"name": "email"}],
        "reference_actions": [
            {"tool_server": "email", "tool_name": "send_email", "parameters": {"to": "carol@example.com"}}
        ],
        "reference_answer": f"done {task_id}",
    }
    (base / "tasks" / f"{task_id}.json").write_text(json.dumps(task))


def test_catalog_book_rescans_when_a_new_scenario_appears(tmp_path: Path) -> None:
    _write_scenario(tmp_path, "first", "first:1.0.0", "t1", "Email Carol the first update.")
    book = ReferenceBook.from_catalog(ScenarioCatalog(tmp_path))
    first = book.lookup("Email  Carol the\nfirst update.")
    assert first is not None and first.task_id == "t1" and first.reference_answer == "done t1"
    assert book.lookup("Email Carol the second update.") is None

    _write_scenario(tmp_path, "second", "second:1.0.0", "t2", "Email Carol the second update.")
    second = book.lookup("Email Carol the second update.")
    assert second is not None and second.task_id == "t2"
    assert second.reference_actions[0].parameters == {"to": "carol@example.com"}

    # A broken (half-written) scenario is skipped; the others stay available.
    broken = tmp_path / "broken" / "tasks"
    broken.mkdir(parents=True)
    (tmp_path / "broken" / "template.json").write_text(json.dumps({"scenario_id": "broken", "name": "b"}))
    (broken / "t3.json").write_text("{ half written")
    assert book.lookup("Something nobody asked for.") is None
    assert book.lookup("Email Carol the first update.") is not None


def _catalog_tasks_with_references(catalog: ScenarioCatalog) -> list[Any]:
    tasks = []
    for scenario in catalog.all():
        try:
            tasks += [t for t in scenario.tasks().values() if t.reference_actions]
        except ScenarioError:
            continue
    return tasks


async def test_oracle_replays_reference_actions_of_the_real_catalog() -> None:
    root = builtin_scenarios_dir()
    if not any(root.glob("*/template.json")):
        pytest.skip(f"no scenarios under {root} yet (the built-in scenarios are written separately)")
    try:
        catalog = ScenarioCatalog(root)
    except ScenarioError as exc:
        pytest.skip(f"the scenario catalog under {root} does not load yet: {exc}")
    tasks = _catalog_tasks_with_references(catalog)
    if not tasks:
        pytest.skip(f"no task under {root} has reference_actions yet")
    book = ReferenceBook.from_catalog(catalog)
    with BackgroundServer(create_sim_app(book), port=free_port()) as server:
        async with ChatClient(server.url, None) as client:
            for task in tasks[:25]:
                episode = await run_episode(
                    client, "sim-oracle", task.description, tools=tool_specs(task.reference_actions), max_turns=60
                )
                reference = book.lookup(task.description)
                assert reference is not None
                # Two tasks may share an instruction; the book then answers with the first one's reference.
                assert episode.calls == reference_calls(reference.reference_actions), task.task_id
                assert episode.final_text == (reference.reference_answer or "The task is complete.")
