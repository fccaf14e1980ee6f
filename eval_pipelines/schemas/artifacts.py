"""RunArtifacts (spec 001): the record an agent fills in and verifiers read."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zstandard
from pydantic import Field, PrivateAttr, ValidationError

from eval_pipelines.schemas._base import WireModel, utc_now_iso
from eval_pipelines.schemas.limits import MAX_ARTIFACTS_BYTES
from eval_pipelines.schemas.tools import ToolCall, ToolCallResult

ARTIFACTS_VERSION = "0.1"

#: How a rollout's artifacts are stored (the service's files, the collector's copies): compact JSON in one zstd
#: frame. `RunArtifacts.dump` picks the format by this suffix; `RunArtifacts.load` reads either format.
STORED_ARTIFACTS_SUFFIX = ".json.zst"
#: Measured on the benchmark task (35 KB of compact JSON, mostly the two state snapshots): level 3 stores 5.6 KB
#: for 0.08 ms of CPU; level 6 saves 4 % more for twice the CPU, level 19 saves 7 % for 55 times it.
ARTIFACTS_ZSTD_LEVEL = 3
#: Every zstd frame starts with these bytes; no JSON text can, so the format is read from the file, not its name.
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

#: Keys of `RunArtifacts.metadata` that the engine fills and verifiers read.
META_STATE = "state"  # {tool_server: {"initial": state, "final": state}}
META_STATE_DIFFS = "state_diffs"  # list of StateDiff dicts: one per mutating call, then one `full` per server
META_USAGE = "usage"  # {"prompt_tokens", "completion_tokens", "total_tokens", "cost_usd", "llm_calls"}
META_TIMEOUT = "timeout"
META_CLIENT_CONTEXT = "client_context"
META_LOGPROBS = "logprobs"
META_NPC_TRANSCRIPTS = "npc_transcripts"
#: {tool_server: workspace URL} of the rollout: where a verifier may query a server before teardown
META_TOOL_SERVERS = "tool_servers"
#: {tool_server: SimLab name} when the task's verifiers are SimLab's (see `Task.simlab_servers`)
META_SIMLAB_SERVERS = "simlab_servers"
#: the task as its SimLab task file holds it, for a task imported from a SimLab bundle: what SimLab hands its
#: verifiers as `task_file` (see `verifiers/simlab_view.py`)
META_SIMLAB_TASK = "simlab_task"
#: {name: URL} of the task's HTTP tool servers of the user's own (`Task.http_servers`): a verifier may query them
#: live during the rollout; nobody records their state, so after it they cannot be brought back
META_HTTP_SERVERS = "http_servers"
#: {tool_server: why its end state cannot be brought back}: set on the copy of the artifacts a re-verification
#: hands its verifiers, for each server they cannot query as the rollout left it
META_UNRESTORABLE_SERVERS = "unrestorable_servers"
#: True when the final answer is a tool call written as text (a template the endpoint did not parse).
META_TEXT_TOOL_CALL = "final_answer_is_tool_call"
#: How many tool calls the model asked for past its per-reply cap (`max_tool_calls_per_reply`), over the whole
#: rollout; absent when the cap was never hit. Those calls were answered "not run", never executed.
META_TOOL_CALLS_OVER_CAP = "tool_calls_over_cap"
#: On a multi-turn task: one entry per ended user turn, the last included: {tool_server: state snapshot} as the
#: agent left it when it handed the turn back to the user.
META_TURN_STATES = "turn_states"
#: On a multi-turn task: how the conversation ended: the stop token the user said, or one of the USER_ENDING_*.
META_USER_ENDING = "user_ending"
#: A scripted user ran out of turns.
USER_ENDING_SCRIPTED = "scripted_end"
#: A simulated user reached its task's `max_turns` without saying a stop token.
USER_ENDING_MAX_TURNS = "max_turns"
#: On a multi-turn task with a simulated user: what the user model said, one text per user turn, the opening first.
META_USER_TURNS = "user_turns"
#: Whether each simulator of the rollout (NPC, simulated user) stayed on script: a list of `SimulatorCheck` dicts.
META_SIMULATOR_CHECKS = "simulator_checks"

#: `SimulatorCheck.simulator` of the simulated user; an NPC's is `npc:<profile_id>`.
SIMULATOR_USER = "user"
SIMULATOR_NPC_PREFIX = "npc:"
#: The checks: an NPC told its secret before anyone asked about one of its reveal topics (or told a secret no topic
#: reveals); a simulated user ended the conversation outside its ending conditions; a simulator said it is an AI,
#: a model or a simulation; a simulator contradicted its instructions (only a judge model can tell).
CHECK_SECRET_UNASKED = "secret_only_when_asked"
CHECK_ENDING = "ended_on_its_conditions"
CHECK_IN_CHARACTER = "stayed_in_character"
CHECK_INSTRUCTIONS = "followed_its_instructions"
#: How a check was decided: by code over the transcript, or by the judge model reading it.
CHECK_METHOD_DETERMINISTIC = "deterministic"
CHECK_METHOD_JUDGE = "judge"


class SimulatorCheck(WireModel):
    """One check of one simulator of a rollout: did it stay on script."""

    simulator: str
    check: str
    method: str = CHECK_METHOD_DETERMINISTIC
    passed: bool
    #: what went wrong (or, for a judge, its reason); empty for a plain pass
    detail: str = ""


class UnreadableArtifacts(ValueError):
    """A stored artifacts file holds no readable RunArtifacts: truncated, corrupt, or larger than
    MAX_ARTIFACTS_BYTES. A ValueError, like pydantic's parse errors, so a caller handles both alike."""


# zstd contexts are reusable but not shareable between threads (the service writes from a thread pool).
_zstd_contexts = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    if (compressor := getattr(_zstd_contexts, "compressor", None)) is None:
        compressor = _zstd_contexts.compressor = zstandard.ZstdCompressor(level=ARTIFACTS_ZSTD_LEVEL)
    return compressor


def _decompressor() -> zstandard.ZstdDecompressor:
    if (decompressor := getattr(_zstd_contexts, "decompressor", None)) is None:
        decompressor = _zstd_contexts.decompressor = zstandard.ZstdDecompressor()
    return decompressor


def _too_large(source: str) -> UnreadableArtifacts:
    return UnreadableArtifacts(f"{source} is larger than the {MAX_ARTIFACTS_BYTES:,}-byte limit of stored artifacts")


def _decompressed(frame: bytes, source: str) -> bytes:
    try:
        declared = zstandard.frame_content_size(frame)
    except zstandard.ZstdError as exc:
        raise UnreadableArtifacts(f"{source} is not a complete zstd frame ({exc})") from exc
    # The frame header's size is what `decompress` allocates, so it is checked first; a frame that declares none
    # (not written here) is capped by `max_output_size` instead, and fails like a truncated one beyond it.
    if declared > MAX_ARTIFACTS_BYTES:
        raise _too_large(source)
    try:
        data = _decompressor().decompress(frame, max_output_size=MAX_ARTIFACTS_BYTES)
    except zstandard.ZstdError as exc:
        beyond = "" if declared >= 0 else f" of at most {MAX_ARTIFACTS_BYTES:,} bytes"
        raise UnreadableArtifacts(f"{source} is not a complete zstd frame{beyond} ({exc})") from exc
    if len(data) > MAX_ARTIFACTS_BYTES:
        raise _too_large(source)
    return data


def read_artifacts_file(path: str | Path) -> bytes:
    """An artifacts file's stored bytes (compressed or plain), unparsed: what a reader in another process (a
    verifier worker) parses with `RunArtifacts.from_stored_bytes`. OSError when the file cannot be read;
    UnreadableArtifacts when it is larger than MAX_ARTIFACTS_BYTES (read no further than that)."""
    with Path(path).open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > MAX_ARTIFACTS_BYTES:
            raise _too_large(str(path))
        # Read what the file holds, not up to the limit: a buffered read allocates the size it is asked for. One
        # byte more tells a file that grew since it was measured, and the limit still bounds it.
        data = file.read(size + 1)
    if len(data) > MAX_ARTIFACTS_BYTES:
        raise _too_large(str(path))
    return data


#: Records handed over in memory at most (see `_Handover`), the stored bytes their files hold at most, and how long
#: one waits for its reader. The local service's collector reads a run's files moments after they are written; a
#: record nobody asks for in time is read from its file instead, as it always could be.
HANDOVER_MAX_RECORDS = 256
HANDOVER_MAX_STORED_BYTES = 4 * 1024 * 1024
HANDOVER_MAX_AGE_SECONDS = 120.0


class _Handover:
    """Records this process wrote, kept until this process reads them back once.

    The local service writes a rollout's artifacts and its collector, in the same process, reads them back to
    build the warehouse's rows: parsing and validating a record it held a moment ago was a visible share of a
    rollout's CPU. A kept record is handed out only while its file is the one written (same inode, size and
    modification time), and only once: the reader owns it, as it owns a record it parsed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[tuple[int, int, int], float, RunArtifacts]] = OrderedDict()
        self._stored_bytes = 0

    @staticmethod
    def _identity(path: str) -> tuple[int, int, int] | None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return stat.st_ino, stat.st_size, stat.st_mtime_ns

    def keep(self, path: Path, record: RunArtifacts) -> None:
        identity = self._identity(str(path))
        if identity is None or identity[1] > HANDOVER_MAX_STORED_BYTES:
            return
        now = time.monotonic()
        with self._lock:
            self._drop(str(path))
            self._kept[str(path)] = (identity, now, record)
            self._stored_bytes += identity[1]
            while self._kept and (
                len(self._kept) > HANDOVER_MAX_RECORDS
                or self._stored_bytes > HANDOVER_MAX_STORED_BYTES
                or now - next(iter(self._kept.values()))[1] > HANDOVER_MAX_AGE_SECONDS
            ):
                self._drop(next(iter(self._kept)))

    def take(self, path: str | Path) -> RunArtifacts | None:
        if not self._kept:
            return None
        with self._lock:
            entry = self._drop(str(path))
        if entry is None or self._identity(str(path)) != entry[0]:
            return None
        return entry[2]

    def _drop(self, path: str) -> tuple[tuple[int, int, int], float, RunArtifacts] | None:
        entry = self._kept.pop(path, None)
        if entry is not None:
            self._stored_bytes -= entry[0][1]
        return entry


_handover = _Handover()


def _write_whole(target: Path, data: bytes) -> None:
    """Write through a temp file and rename it into place, so a reader (or a crash) never leaves half a file: a
    truncated zstd frame loses the whole record, not just its tail."""
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        temp.write_bytes(data)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


class RunArtifacts(WireModel):
    version: str = ARTIFACTS_VERSION
    task_id: str
    task: str
    model: str | None = None
    provider: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_results: list[ToolCallResult] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    final_observation: str | None = None
    error: str | None = None
    steps_taken: int = 0
    max_steps: int | None = None
    created_at: str = Field(default_factory=utc_now_iso)

    _on_step: Callable[[int], None] | None = PrivateAttr(default=None)

    def set_on_step(self, callback: Callable[[int], None] | None) -> None:
        self._on_step = callback

    def record_message(self, role: str, content: Any, **extra: Any) -> None:
        """Append a message; `extra` carries chat fields such as `tool_calls` or `tool_call_id`."""
        self.messages.append({"role": role, "content": content, "timestamp": utc_now_iso(), **extra})

    def record_tool_call(
        self, call: ToolCall, result: ToolCallResult, on_step: Callable[[int], None] | None = None
    ) -> None:
        self.tool_calls.append(call)
        self.tool_results.append(result)
        self.steps_taken += 1
        callback = on_step or self._on_step
        if callback is not None:
            # A progress hook must never break the rollout.
            with contextlib.suppress(Exception):
                callback(self.steps_taken)

    def set_final_observation(self, text: str) -> None:
        self.final_observation = text

    def set_error(self, text: str) -> None:
        self.error = text

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def dump(self, path: str | Path, *, hand_over: bool = False) -> Path:
        """Write the record to `path`: as indented JSON (spec 001's `dump`), or, when the name ends in
        `STORED_ARTIFACTS_SUFFIX`, as the stored form (compact JSON, zstd). Either way `load` reads it back.

        With `hand_over`, the caller gives the record up: this process's next `load` of the unchanged file returns
        this very object instead of parsing the file (see `_Handover`), so the caller must not change it."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        # pydantic-core's encoder: the pure-Python one cost a visible share of a rollout's CPU.
        if target.name.endswith(STORED_ARTIFACTS_SUFFIX):
            data = _compressor().compress(self.model_dump_json().encode())
        else:
            data = self.model_dump_json(indent=2).encode()
        _write_whole(target, data)
        if hand_over:
            _handover.keep(target, self)
        return target

    @classmethod
    def load(cls, path: str | Path) -> RunArtifacts:
        """The record in a file written by `dump`, compressed or plain JSON (files stored before compression still
        load). OSError when the file cannot be read, UnreadableArtifacts when it holds no readable record."""
        handed = _handover.take(path)
        if handed is not None:
            return handed
        return cls.from_stored_bytes(read_artifacts_file(path), source=str(path))

    @classmethod
    def from_stored_bytes(cls, data: bytes, *, source: str = "stored artifacts") -> RunArtifacts:
        """The record in a stored file's bytes (`read_artifacts_file`), compressed or plain JSON; `source` names
        them in the error."""
        if data.startswith(_ZSTD_MAGIC):
            data = _decompressed(data, source)
        elif len(data) > MAX_ARTIFACTS_BYTES:
            raise _too_large(source)
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"])
            detail = f"{where}: {first['msg']}" if where else first["msg"]
            raise UnreadableArtifacts(
                f"{source} is not a RunArtifacts record ({exc.error_count()} error(s); {detail})"
            ) from exc
