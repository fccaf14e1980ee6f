"""Offline SIMULATED models served on the OpenAI chat-completions wire.

They let the whole pipeline run without a provider account: the agent talks to them exactly as it would
to a real endpoint. They are clearly labelled: every response has `system_fingerprint: "simulated"`.

- `sim-oracle` replays a task's reference actions, one tool call per turn, then gives the reference answer.
- `sim-noisy` does the same but deviates at each step with probability `noise` (skips the action, corrupts
  a parameter, or stops early), so pass rates, pass@k and variance have something to measure.
- `sim-noop` never calls a tool.
- `sim-user` plays a multi-turn task's simulated user: it says the task's `opening`, then, at the agent's next
  text-only reply, the task's first stop token.

On a multi-turn task the agents play `reference_turns[turn]` in each user turn (the turn is the count of user
messages so far), then answer with the reference answer; `sim-noisy` deviates per step, turn by turn.

The sim recognises a task by its instruction (the first `user` message: a scripted user's first turn, or a
simulated user's `opening`) through a `ReferenceBook`; `sim-user` by its system prompt.
It is stateless: each reply is derived from the request alone (instruction, the number of tool calls already
made, and the `user` field, which the agent fills with the rollout id), so a rollout replays identically.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioError
from eval_pipelines.llm.history import summarised_call_count
from eval_pipelines.llm.types import TOOL_NAME_SEPARATOR, ChatMessage, ChatRequest, wire_tool_name
from eval_pipelines.schemas.scenarios import SimulatedUserSpec, Task
from eval_pipelines.schemas.sweep import SIMULATED_PREFIX, SIMULATED_USER_MODEL, is_simulated_model
from eval_pipelines.schemas.tools import ToolCall
from eval_pipelines.sim.task_mark import marked_task

logger = logging.getLogger(__name__)

SIM_ORACLE = "sim-oracle"
SIM_NOISY = "sim-noisy"
SIM_NOOP = "sim-noop"
SIM_USER = SIMULATED_USER_MODEL
SIMULATED_MODELS: tuple[str, ...] = (SIM_ORACLE, SIM_NOISY, SIM_NOOP)
SIMULATED_FINGERPRINT = "simulated"
DEFAULT_NOISE = 0.35
#: Replies in which the agents play one user turn at most; a longer turn's calls go several to a reply.
SIM_REPLIES_PER_TURN = 16

UNKNOWN_TASK_REPLY = "I could not find a way to complete this task."
#: What `sim-user` says when it does not know the task whose user it plays.
UNKNOWN_USER_REPLY = "I am not sure what I need."
NOOP_REPLY = "I am unable to complete this task."
EARLY_STOP_REPLY = "I have done what I can on this task."
EMPTY_ANSWER_REPLY = "The task is complete."
WRONG_ADDRESS = "someone.else@example.org"
GENERIC_TEXT = "Following up on your message."

# An instruction shorter than this is too generic to be recognised inside a longer prompt.
_MIN_CONTAINED_INSTRUCTION = 24
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TOKEN = re.compile(r"\s*\S+|\s+")
_ALTERNATIVE_TOKENS = (" the", " a", " to", " and", " of", " I", " it", " this", ".", ",")


#: Every simulated model, agent or persona (NPC, judge, generator), is named with this prefix, so a name alone
#: tells a simulated number from a real model's.
def normalise_instruction(text: str) -> str:
    return " ".join(text.split())


@dataclass
class TaskReference:
    task_id: str
    reference_actions: list[ToolCall] = field(default_factory=list)
    reference_answer: str = ""
    #: on a multi-turn task, the calls of each user turn (then `reference_actions` is not played)
    reference_turns: list[list[ToolCall]] = field(default_factory=list)
    #: the simulated user's first message and its stop tokens (what `sim-user` says)
    user_opening: str = ""
    user_stop_tokens: list[str] = field(default_factory=list)


def _reference_of(task: Task) -> TaskReference:
    user = task.user if isinstance(task.user, SimulatedUserSpec) else None
    return TaskReference(
        task_id=task.task_id,
        reference_actions=list(task.reference_actions),
        reference_answer=task.reference_answer,
        reference_turns=[list(turn) for turn in task.reference_turns],
        user_opening=user.opening if user is not None else "",
        user_stop_tokens=list(user.stop_tokens) if user is not None else [],
    )


def _instruction_keys(task: Task) -> list[str]:
    """The first user messages an agent of this task sends: its description, and a simulated user's opening."""
    keys = [normalise_instruction(task.description)]
    if isinstance(task.user, SimulatedUserSpec) and task.user.opening:
        keys.append(normalise_instruction(task.user.opening))
    return [key for key in keys if key]


def _user_key(task: Task) -> str:
    return normalise_instruction(task.user.system_prompt) if isinstance(task.user, SimulatedUserSpec) else ""


def _catalog_fingerprint(root: Path) -> tuple[tuple[str, int, int], ...]:
    """Cheap change detector: re-reading every task file on each miss would be slow with many scenarios."""
    if not root.is_dir():
        return ()
    entries: list[tuple[str, int, int]] = []
    for path in sorted([*root.glob("*/template.json"), *root.glob("*/tasks/*.json")]):
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(entries)


class ReferenceBook:
    """Instruction text (whitespace-normalised) -> the task's reference actions and answer.

    Thread-safe: the sim server resolves lookups on a thread pool. A book built with `from_catalog` re-scans
    the catalog when a lookup misses and the scenario files changed, so newly generated scenarios are found
    without a restart.
    """

    def __init__(self, catalog: ScenarioCatalog | None = None) -> None:
        self._catalog = catalog
        self._added: dict[str, TaskReference] = {}
        self._indexed: dict[str, TaskReference] = {}
        #: a simulated user's system prompt -> its task, for `sim-user`
        self._users: dict[str, TaskReference] = {}
        self._indexed_users: dict[str, TaskReference] = {}
        #: (scenario id, task id) -> the task, for requests that mark the task they play (TASK_MARK)
        self._by_task: dict[tuple[str, str], TaskReference] = {}
        #: marked tasks still unknown after a re-scan: not re-scanned for again
        self._missing_tasks: set[tuple[str, str]] = set()
        self._fingerprint: tuple[tuple[str, int, int], ...] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_catalog(cls, catalog: ScenarioCatalog) -> ReferenceBook:
        book = cls(catalog)
        with book._lock:
            book._index_catalog(refresh=False)
        return book

    def __len__(self) -> int:
        with self._lock:
            return len({**self._indexed, **self._added})

    def add(
        self,
        instruction: str,
        *,
        task_id: str,
        reference_actions: Sequence[ToolCall | Mapping[str, Any]] = (),
        reference_answer: str = "",
    ) -> TaskReference:
        """Register a task by hand (tests, ad-hoc tasks); wins over a catalog entry with the same text."""
        key = normalise_instruction(instruction)
        if not key:
            raise ValueError("instruction must not be empty")
        reference = TaskReference(
            task_id=task_id,
            reference_actions=[
                ToolCall.model_validate(a) if not isinstance(a, ToolCall) else a for a in reference_actions
            ],
            reference_answer=reference_answer,
        )
        with self._lock:
            self._added[key] = reference
        return reference

    def add_task(self, task: Task) -> TaskReference:
        """Register a whole task by hand (tests): its instruction, its simulated user's opening and prompt."""
        reference = _reference_of(task)
        with self._lock:
            for key in _instruction_keys(task):
                self._added[key] = reference
            if user_key := _user_key(task):
                self._users[user_key] = reference
        return reference

    def _lookup_user_prompt(self, system_prompt: str) -> TaskReference | None:
        """The task whose simulated user has this system prompt."""
        key = normalise_instruction(system_prompt)
        with self._lock:
            found = self._users.get(key) or self._indexed_users.get(key)
            if found is None and self._catalog is not None and self._catalog_changed():
                self._index_catalog(refresh=True)
                found = self._indexed_users.get(key)
            return found

    def find_known(self, instruction: str, marked: tuple[str, str] | None = None) -> TaskReference | None:
        """An exact match among the tasks already indexed: no file is read, so callers need no thread. A task
        registered by hand with this instruction comes first, then the task the request marks, then the text."""
        key = normalise_instruction(instruction)
        with self._lock:
            return self._added.get(key) or (self._by_task.get(marked) if marked else None) or self._find(key)

    def lookup(self, instruction: str, marked: tuple[str, str] | None = None) -> TaskReference | None:
        key = normalise_instruction(instruction)
        with self._lock:
            if marked is not None and (found := self._added.get(key) or self._marked(marked)) is not None:
                return found
            if not key:
                return None
            found = self._find(key)
            if found is None and self._catalog is not None and self._catalog_changed():
                self._index_catalog(refresh=True)
                found = self._find(key)
            if found is None:
                found = self._find_contained(key)
            return found

    def _marked(self, marked: tuple[str, str]) -> TaskReference | None:
        # A miss re-scans the catalog once: a benchmark materialised since the last scan lives outside the root
        # the change detector watches.
        found = self._by_task.get(marked)
        if found is None and self._catalog is not None and marked not in self._missing_tasks:
            self._index_catalog(refresh=True)
            found = self._by_task.get(marked)
            if found is None:
                self._missing_tasks.add(marked)
        return found

    def lookup_user(self, system_prompt: str, marked: tuple[str, str] | None = None) -> TaskReference | None:
        """The task whose simulated user this is: the marked task, else the one with this system prompt."""
        if marked is not None:
            with self._lock:
                if (found := self._marked(marked)) is not None:
                    return found
        return self._lookup_user_prompt(system_prompt)

    def _find(self, key: str) -> TaskReference | None:
        return self._added.get(key) or self._indexed.get(key)

    def _find_contained(self, key: str) -> TaskReference | None:
        # Agents sometimes wrap the instruction ("Task: ...\nUse the tools..."); take the longest known one.
        best: tuple[int, TaskReference] | None = None
        for source in (self._indexed, self._added):
            for text, reference in source.items():
                if len(text) >= _MIN_CONTAINED_INSTRUCTION and text in key and (best is None or len(text) >= best[0]):
                    best = (len(text), reference)
        return best[1] if best else None

    def _catalog_changed(self) -> bool:
        assert self._catalog is not None
        return _catalog_fingerprint(self._catalog.root) != self._fingerprint

    def _index_catalog(self, *, refresh: bool) -> None:
        assert self._catalog is not None
        # Taken before reading, so a file written during the scan triggers another scan next time.
        self._fingerprint = _catalog_fingerprint(self._catalog.root)
        if refresh:
            try:
                self._catalog.refresh()
            except ScenarioError as exc:
                logger.warning("simulated models: keeping the previous task index, catalog re-scan failed: %s", exc)
                return
        indexed: dict[str, TaskReference] = {}
        users: dict[str, TaskReference] = {}
        by_task: dict[tuple[str, str], TaskReference] = {}
        for scenario in self._catalog.all():
            try:
                tasks = scenario.tasks()
            except ScenarioError as exc:
                # One broken (e.g. half-written generated) scenario must not hide every other task.
                logger.warning("simulated models: skipping scenario %s: %s", scenario.scenario_id, exc)
                continue
            for task in tasks.values():
                reference = _reference_of(task)
                by_task[(scenario.scenario_id, task.task_id)] = reference
                for key in _instruction_keys(task):
                    if key in indexed:
                        logger.debug("simulated models: task %s repeats the instruction of another task", task.task_id)
                        continue
                    indexed[key] = reference
                if user_key := _user_key(task):
                    users.setdefault(user_key, reference)
        self._indexed = indexed
        self._indexed_users = users
        self._by_task = by_task
        self._missing_tasks.clear()


# --- episode planning -------------------------------------------------------------------------------------

DeviationKind = Literal["skip", "corrupt", "stop"]
_DEVIATIONS: tuple[DeviationKind, ...] = ("skip", "corrupt", "stop")


@dataclass(frozen=True)
class _Plan:
    """What the model will do over the whole episode: the calls in order, then the closing text."""

    calls: tuple[ToolCall, ...]
    final_text: str


def _step_rng(user: str | None, instruction: str, step: int) -> random.Random:
    # hashlib, not hash(): Python's str hash is salted per process, and replays must match across processes.
    material = f"{user or ''}\x1f{instruction}\x1f{step}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))


def _corrupt(action: ToolCall) -> ToolCall | None:
    """A wrong version of the action (first address -> someone else, else first text -> generic text)."""
    params = dict(action.parameters)
    for name, value in params.items():
        if isinstance(value, str) and _EMAIL.match(value.strip()) and value.strip() != WRONG_ADDRESS:
            params[name] = WRONG_ADDRESS
            return action.model_copy(update={"parameters": params})
        if isinstance(value, list) and value and isinstance(value[0], str) and _EMAIL.match(value[0].strip()):
            params[name] = [WRONG_ADDRESS, *value[1:]]
            return action.model_copy(update={"parameters": params})
    for name, value in params.items():
        if isinstance(value, str) and value != GENERIC_TEXT:
            params[name] = GENERIC_TEXT
            return action.model_copy(update={"parameters": params})
    return None


def _plan(
    reference: TaskReference, *, noisy: bool, noise: float, user: str | None, instruction: str, turn: int | None = None
) -> _Plan:
    """The episode's plan; on a multi-turn task (`turn` given), the plan of that user turn."""
    answer = reference.reference_answer or EMPTY_ANSWER_REPLY
    if turn is None:
        actions = reference.reference_actions
    else:
        actions = reference.reference_turns[turn] if turn < len(reference.reference_turns) else []
        # Each turn draws its own deviations: the same step index in two turns is two different steps.
        instruction = f"{instruction}\x1fturn {turn}"
    if not noisy:
        return _Plan(tuple(actions), answer)
    calls: list[ToolCall] = []
    for step, action in enumerate(actions):
        rng = _step_rng(user, instruction, step)
        if rng.random() >= noise:
            calls.append(action)
            continue
        kind = rng.choice(_DEVIATIONS)
        if kind == "stop":
            return _Plan(tuple(calls), EARLY_STOP_REPLY)
        if kind == "corrupt":
            corrupted = _corrupt(action)
            if corrupted is not None:
                calls.append(corrupted)
        # "skip", or a corruption of an action without text parameters: the action is simply not done.
    return _Plan(tuple(calls), answer)


# --- wire helpers -----------------------------------------------------------------------------------------


def _estimate_tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


def _message_chars(messages: Iterable[ChatMessage]) -> int:
    total = 0
    for message in messages:
        total += len(message.content or "")
        for call in message.tool_calls or []:
            total += len(call.function.name) + len(call.function.arguments)
    return total


def _token_logprobs(text: str, top_logprobs: int | None) -> list[dict[str, Any]]:
    """Plausible, deterministic per-token log-probabilities (whitespace-delimited pseudo-tokens)."""
    entries: list[dict[str, Any]] = []
    for index, token in enumerate(_TOKEN.findall(text)):
        digest = hashlib.sha256(f"{index}\x1f{token}".encode()).digest()
        logprob = -round(0.001 + (int.from_bytes(digest[:4], "big") % 2500) / 1000, 4)
        alternatives = []
        for rank, alt in enumerate(a for a in _ALTERNATIVE_TOKENS if a != token):
            if rank >= max(0, (top_logprobs or 0) - 1):
                break
            alternatives.append({"token": alt, "logprob": round(logprob - 1.5 - rank, 4), "bytes": list(alt.encode())})
        top = (
            [{"token": token, "logprob": logprob, "bytes": list(token.encode())}, *alternatives] if top_logprobs else []
        )
        entries.append({"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": top})
    return entries


def _openai_error(
    status: int, message: str, *, type_: str = "invalid_request_error", code: str | None = None
) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"error": {"message": message, "type": type_, "param": None, "code": code}},
    )


def _model_list() -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": name, "object": "model", "created": 0, "owned_by": "simulated"} for name in SIMULATED_MODELS],
    }


def _completion(
    request: ChatRequest,
    *,
    text: str | None,
    tool_call: dict[str, Any] | list[dict[str, Any]] | None,
    step: int,
) -> dict[str, Any]:
    prompt_tokens = _estimate_tokens(_message_chars(request.messages))
    calls = [tool_call] if isinstance(tool_call, dict) else tool_call or []
    if calls:
        output_chars = sum(len(call["function"]["name"]) + len(call["function"]["arguments"]) for call in calls)
    else:
        output_chars = len(text or "")
    completion_tokens = _estimate_tokens(output_chars)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    logprobs = None
    if request.logprobs and text is not None:
        logprobs = {"content": _token_logprobs(text, request.top_logprobs)}
    digest = hashlib.sha256(f"{request.model}\x1f{request.user or ''}\x1f{step}\x1f{time.time_ns()}".encode())
    return {
        "id": f"chatcmpl-sim-{digest.hexdigest()[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "system_fingerprint": SIMULATED_FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": logprobs,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _offered_tools(request: ChatRequest) -> set[str]:
    if request.tool_choice == "none" or not request.tools:
        return set()
    return {tool.function.name for tool in request.tools}


def _user_turn(request: ChatRequest) -> tuple[int, int]:
    """(the user turn the conversation is in, counted from 0; the calls already made in it)."""
    turn, done = -1, 0
    for message in request.messages:
        if message.role == "user":
            turn, done = turn + 1, 0
        elif message.role == "assistant":
            done += len(message.tool_calls or [])
    return max(turn, 0), done


def _reply(request: ChatRequest, reference: TaskReference | None, *, noise: float, instruction: str) -> dict[str, Any]:
    multi_turn = reference is not None and bool(reference.reference_turns)
    turn: int | None = None
    if multi_turn:
        turn, done = _user_turn(request)
    else:
        done = sum(len(m.tool_calls or []) for m in request.messages if m.role == "assistant")
        # A shortened history states how many calls its summary stands for (agents.context); count those too.
        done += summarised_call_count([{"role": m.role, "content": m.content} for m in request.messages])
    if request.model == SIM_NOOP:
        return _completion(request, text=NOOP_REPLY, tool_call=None, step=done)
    if reference is None:
        return _completion(request, text=UNKNOWN_TASK_REPLY, tool_call=None, step=done)
    plan = _plan(
        reference, noisy=request.model == SIM_NOISY, noise=noise, user=request.user, instruction=instruction, turn=turn
    )
    if done >= len(plan.calls):
        return _completion(request, text=plan.final_text, tool_call=None, step=done)
    offered = _offered_tools(request)
    # A task that lists its tools by their own names (`cd`, not `bfcl__cd`) names its hidden ones so too.
    bare = bool(offered) and all(TOOL_NAME_SEPARATOR not in name for name in offered)
    # A turn longer than SIM_REPLIES_PER_TURN replies is played several calls a reply, as a model calls in
    # parallel, so that it fits a per-turn step cap (a BFCL long-context turn holds up to 34 gold calls).
    per_reply = math.ceil(len(plan.calls) / SIM_REPLIES_PER_TURN) if multi_turn else 1
    tool_calls: list[dict[str, Any]] = []
    for index, action in enumerate(plan.calls[done : done + per_reply], start=done):
        wire = wire_tool_name(action.tool_server, action.tool_name)
        name = wire if wire in offered else action.tool_name if (action.tool_name in offered or bare) else wire
        if name not in offered and not multi_turn:
            # A real model cannot call a tool it was not given: it answers in text instead. A benchmark's gold
            # (multi-turn) is played as written, even a call its turn has not listed yet: upstream runs it by name.
            return _completion(
                request,
                text=f"I could not complete this task: the tool {name} is not available.",
                tool_call=None,
                step=done,
            )
        tool_calls.append(
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(action.parameters)},
            }
        )
    return _completion(request, text=None, tool_call=tool_calls, step=done)


#: A text-only simulated persona (an NPC, a judge, a data generator): the request in, the reply text out.
SimPersona = Callable[[ChatRequest], str]


def simulated_user(book: ReferenceBook) -> SimPersona:
    """`sim-user`: the simulated user of a multi-turn task, found by the task its requests mark, else by its system
    prompt. It sees the conversation
    with the roles flipped (its own messages are `assistant`): first it says the task's opening, then, when the
    agent has answered, the first stop token."""

    def reply(request: ChatRequest) -> str:
        marked = marked_task(request.user)
        system = next((m.content for m in request.messages if m.role == "system" and m.content), None)
        reference = book.lookup_user(system or "", marked)
        if reference is None:
            return UNKNOWN_USER_REPLY
        said = sum(1 for m in request.messages if m.role == "assistant")
        if said == 0 and reference.user_opening:
            return reference.user_opening
        return reference.user_stop_tokens[0] if reference.user_stop_tokens else UNKNOWN_USER_REPLY

    return reply


def create_sim_app(
    book: ReferenceBook, *, noise: float = DEFAULT_NOISE, personas: Mapping[str, SimPersona] | None = None
) -> FastAPI:
    """The simulated models as an OpenAI-compatible ASGI app (`/v1/...` and unprefixed paths).

    `personas` adds further simulated models by name (each labelled simulated like the agents), so NPCs,
    judges and generators live in their own modules and share this one endpoint.

    Auth: any bearer token, or none, is accepted. This is a local offline stand-in that holds no data worth
    protecting and must work with whatever key a ModelConfig carries (the key field is required). The token
    is never read, logged or echoed.
    """
    if not 0.0 <= noise <= 1.0:
        raise ValueError("noise must be between 0.0 and 1.0")
    extra = {SIM_USER: simulated_user(book), **(personas or {})}
    clash = sorted(set(extra) & set(SIMULATED_MODELS))
    if clash:
        raise ValueError(f"persona names collide with the simulated agents: {clash}")
    unlabelled = sorted(name for name in extra if not is_simulated_model(name))
    if unlabelled:
        raise ValueError(f"simulated persona names must start with {SIMULATED_PREFIX!r}: {unlabelled}")
    app = FastAPI(title="eval_pipelines simulated models", docs_url=None, redoc_url=None, openapi_url=None)

    async def chat_completions(request: Request) -> JSONResponse:
        try:
            # Parsed and validated in one pass by pydantic-core: requests carry the whole conversation.
            chat = ChatRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            first = exc.errors()[0]
            if first["type"] == "json_invalid":
                return _openai_error(400, "request body is not valid JSON")
            loc = ".".join(str(p) for p in first["loc"]) or "<root>"
            return _openai_error(400, f"invalid request: {loc}: {first['msg']}")
        persona = extra.get(chat.model)
        if persona is not None:
            text = await run_in_threadpool(persona, chat)
            return JSONResponse(_completion(chat, text=text, tool_call=None, step=0))
        if chat.model not in SIMULATED_MODELS:
            return _openai_error(404, f"model {chat.model!r} not found", code="model_not_found")
        instruction = chat.first_user_content()
        if instruction is None:
            return _openai_error(400, "messages must contain a user message (the task instruction)")
        # A known task is a dictionary hit; only a miss may re-scan the catalog's files, off the event loop.
        marked = marked_task(chat.user)
        reference = book.find_known(instruction, marked) or await run_in_threadpool(book.lookup, instruction, marked)
        reply = _reply(chat, reference, noise=noise, instruction=normalise_instruction(instruction))
        return JSONResponse(reply)

    async def models() -> dict[str, Any]:
        listing = _model_list()
        listing["data"].extend(
            {"id": name, "object": "model", "created": 0, "owned_by": "simulated"} for name in sorted(extra)
        )
        return listing

    async def model(model_id: str) -> Any:
        if model_id not in SIMULATED_MODELS and model_id not in extra:
            return _openai_error(404, f"model {model_id!r} not found", code="model_not_found")
        return {"id": model_id, "object": "model", "created": 0, "owned_by": "simulated"}

    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    for prefix in ("/v1", ""):
        app.add_api_route(f"{prefix}/chat/completions", chat_completions, methods=["POST"])
        app.add_api_route(f"{prefix}/models", models, methods=["GET"])
        app.add_api_route(f"{prefix}/models/{{model_id}}", model, methods=["GET"])
    app.add_api_route("/health", health, methods=["GET"])
    return app
