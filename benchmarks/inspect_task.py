"""The Inspect AI side of the overhead benchmark: the same email task, written the way Inspect users write it.

Runs in its own virtualenv (`benchmarks/.venv-inspect`, see `benchmarks/overhead.py --help`), because
inspect-ai pins packages this project pins differently; so this file imports nothing from `eval_pipelines`.

The task: one `Sample` per rollout of the benchmark scenario (a copy of email_ops_011: 5 tool calls and a final
answer). Tools are Inspect `@tool` functions over a per-sample mailbox in the sample `store()`, seeded from the
scenario's own seed files and following the built-in email server's semantics (same tool names, parameters and
state layout), so the scenario's own state verifier (standard library only) scores the final mailbox. The store
holds that live mailbox and nothing else: the initial mailbox the verifier compares it with is the same for every
sample, so it is built once and kept in the scorer's closure (Inspect snapshots the whole store around every
span, and a second copy there would cost Inspect work our side does not do).

Two zero-latency models:
- `mockllm`: Inspect's `mockllm/model` with a callable `custom_outputs` that replays the reference actions from
  the conversation (a shared output list would hand concurrent samples each other's turns);
- `openai`: Inspect's OpenAI-compatible provider (`openai-api/bench/<model>`) pointed at the same zero-latency
  simulated endpoint our side uses.

Two sets of eval() settings (`--settings`, see `EVAL_SETTINGS`):
- `default`: eval() as a user gets it. Nothing is passed beyond what the run needs (task, model, epochs, the
  benchmark's concurrency as `max_samples` and `max_connections`, and `log_dir` so the log lands in the run
  folder, where its size is measured). So Inspect 0.3.285 resolves: display "full" (`_util/constants.py`
  `DEFAULT_DISPLAY`), which it renders with its rich display because stdout is a pipe here, not a terminal
  (`_display/core/active.py`: the textual UI needs `sys.stdout.isatty()`); `log_realtime=True`,
  `score_display=True`, `log_samples=True` (`log/_log.py` `eval_config_defaults`); the control-channel server on
  (`_control/server.py` `resolve_ctl_server`: `None` -> enabled); the `.eval` log format (`DEFAULT_LOG_FORMAT`);
  console log level "warning" (`DEFAULT_LOG_LEVEL`). The parent clears `INSPECT_*` variables from this
  process's environment, which would otherwise change these defaults.
- `lean`: every switch Inspect offers that removes work without removing what the run records:
  `log_realtime=False` (no per-sample event buffer database, `_eval/task/log.py`), `display="none"`,
  `ctl_server=False` (no control-channel server) and `score_display=False` (no running metrics). The samples
  are still logged (`log_samples` stays on: the transcript is what our side's traces are compared with).

    benchmarks/.venv-inspect/bin/python benchmarks/inspect_task.py --scenario-dir DIR --samples 200 --epochs 1 \
        --model mockllm --settings lean --max-samples 10 --log-dir /tmp/x

Prints one JSON object: wall seconds, process CPU seconds, samples scored and passed, the size of the timed
run's log folder, the endpoint's CPU when `--endpoint-pid` names it, and under `inspect` the exact eval()
arguments passed and the settings Inspect resolved from them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import re
import resource
import sys
import time
from pathlib import Path
from typing import Any

import inspect_ai
from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver, system_message, use_tools
from inspect_ai.tool import Tool, ToolError, ToolInfo, tool
from inspect_ai.util import display_type, store

#: The reference agent's system prompt (eval_pipelines.agents.tool_calling.DEFAULT_SYSTEM_PROMPT), copied so
#: both sides send the model the same conversation.
SYSTEM_PROMPT = (
    "You are a capable assistant working inside a company's tools. Use the tools to complete the user's task. "
    "Act on the tools rather than describing what you would do. When the task is done, reply with a short "
    "summary and no tool call."
)
SERVER = "email"
ACCOUNT = "agent@example.com"
#: eval() arguments per `--settings`, beyond task, model, epochs, max_samples and log_dir (see the module doc).
EVAL_SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "lean": {"log_realtime": False, "display": "none", "ctl_server": False, "score_display": False},
}
_ADDRESS = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")


# --- the mailbox (the built-in email server's state layout) ----------------------------------------------------


def _addresses(raw: str | list[str]) -> list[str]:
    parts = raw if isinstance(raw, list) else re.split(r"[,;]", raw)
    found: list[str] = []
    for part in parts:
        address = part.strip().lower()
        if not address:
            continue
        if not _ADDRESS.match(address):
            raise ToolError(f"Invalid email address '{part.strip()}'")
        if address not in found:
            found.append(address)
    return found


def seeded_mailbox(seed_files: list[dict[str, Any]]) -> dict[str, Any]:
    state: dict[str, Any] = {"emails": {}, "contacts": {}, "settings": {"account": {"email": ACCOUNT}}}
    for seed in seed_files:
        if "account" in seed:
            state["settings"]["account"] = {"email": seed["account"].strip().lower()}
        for contact in seed.get("contacts", []):
            address = contact["email"].strip().lower()
            state["contacts"][address] = {
                "email": address,
                "name": str(contact.get("name") or ""),
                "title": str(contact.get("title") or ""),
            }
        for email in seed.get("emails", []):
            sender = _addresses(email["from"])[0]
            folder = email.get("folder") or ("sent" if sender == state["settings"]["account"]["email"] else "inbox")
            state["emails"][email["id"]] = {
                "id": email["id"],
                "from": sender,
                "to": _addresses(email["to"]),
                "cc": _addresses(email.get("cc") or []),
                "subject": str(email["subject"]),
                "body": str(email["body"]),
                "folder": folder,
                "timestamp": str(email["timestamp"]),
                "read": bool(email.get("read", folder != "inbox")),
                "in_reply_to": email.get("in_reply_to"),
            }
    return state


def _mailbox() -> dict[str, Any]:
    mailbox: dict[str, Any] = store().get("mailbox")
    return mailbox


def _find(email_id: str) -> dict[str, Any]:
    email = _mailbox()["emails"].get(email_id)
    if email is None:
        raise ToolError(f"Email '{email_id}' not found")
    return dict(email)


def _deliver(
    to: list[str], subject: str, body: str, cc: list[str] | None = None, in_reply_to: str | None = None
) -> str:
    mailbox = _mailbox()
    numbers = [int(key[5:]) for key in mailbox["emails"] if key.startswith("sent-") and key[5:].isdigit()]
    email_id = f"sent-{max(numbers, default=0) + 1:04d}"
    latest = max((e["timestamp"] for e in mailbox["emails"].values()), default="2025-01-06T08:59:00Z")
    # The server's deterministic clock: one minute after the latest email.
    timestamp = (dt.datetime.fromisoformat(latest.replace("Z", "+00:00")) + dt.timedelta(minutes=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    mailbox["emails"][email_id] = {
        "id": email_id,
        "from": mailbox["settings"]["account"]["email"],
        "to": to,
        "cc": cc or [],
        "subject": subject,
        "body": body,
        "folder": "sent",
        "timestamp": timestamp,
        "read": True,
        "in_reply_to": in_reply_to,
    }
    return email_id


def _line(email: dict[str, Any]) -> str:
    return (
        f"[{email['id']}] {email['timestamp']} | from: {email['from']} | to: {', '.join(email['to'])} | "
        f"subject: {email['subject']} ({email['folder']})"
    )


def _newest_first(emails: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(emails, key=lambda e: (e["timestamp"], e["id"]), reverse=True)


# --- tools: one per email-server tool, named as the agent sees them (`email__<tool>`) ---------------------------


@tool(name="email__send_email")
def send_email() -> Tool:
    async def execute(to: str, subject: str, body: str, cc: str = "") -> str:
        """Send a new email from your account. Separate several recipients with commas.

        Args:
            to: Recipient address, or several addresses separated by commas.
            subject: Subject line.
            body: Plain-text body.
            cc: Optional CC address(es), separated by commas.
        """
        recipients = _addresses(to)
        email_id = _deliver(recipients, subject, body, cc=_addresses(cc))
        return f"Email sent to {', '.join(recipients)} with subject '{subject}'. Id: {email_id}."

    return execute


@tool(name="email__reply_to_email")
def reply_to_email() -> Tool:
    async def execute(email_id: str, body: str) -> str:
        """Reply to an email's sender. The subject becomes 'Re: <original subject>'.

        Args:
            email_id: Id of the email to reply to.
            body: Plain-text body of the reply.
        """
        original = _find(email_id)
        subject = original["subject"] if original["subject"].lower().startswith("re:") else f"Re: {original['subject']}"
        new_id = _deliver([original["from"]], subject, body, in_reply_to=email_id)
        return f"Reply sent to {original['from']} with subject '{subject}'. Id: {new_id}."

    return execute


@tool(name="email__forward_email")
def forward_email() -> Tool:
    async def execute(email_id: str, to: str, note: str = "") -> str:
        """Forward an email, with an optional note above the original message.

        Args:
            email_id: Id of the email to forward.
            to: Recipient address, or several addresses separated by commas.
            note: Optional note placed above the forwarded message.
        """
        original = _find(email_id)
        body = f"{note}\n\n---------- Forwarded message ----------\n{original['body']}"
        new_id = _deliver(_addresses(to), f"Fwd: {original['subject']}", body)
        return f"Email '{email_id}' forwarded. Id: {new_id}."

    return execute


@tool(name="email__search_emails")
def search_emails() -> Tool:
    async def execute(query: str, kind: str = "containing", start: int = 0, limit: int = 20) -> str:
        """Search all folders, newest first, case-insensitively.

        Args:
            query: Text to look for.
            kind: What to match: 'to', 'from' or 'containing'.
            start: Index of the first result to return (for paging).
            limit: Maximum number of results (1-200).
        """
        needle = query.strip().lower()

        def matches(email: dict[str, Any]) -> bool:
            if kind == "from":
                return needle in email["from"]
            if kind == "to":
                return any(needle in a for a in email["to"] + email["cc"])
            haystack = " ".join([email["subject"], email["body"], email["from"], *email["to"], *email["cc"]])
            return needle in haystack.lower()

        found = _newest_first([e for e in _mailbox()["emails"].values() if matches(e)])
        if not found:
            return f"No emails match '{query}' (kind={kind})."
        page = found[start : start + limit]
        return "\n".join([f"{len(found)} email(s) match '{query}' (kind={kind}):", *(_line(e) for e in page)])

    return execute


@tool(name="email__get_email")
def get_email() -> Tool:
    async def execute(email_id: str) -> str:
        """Read one email in full, including its body.

        Args:
            email_id: Id of the email.
        """
        email = _find(email_id)
        head = f"ID: {email['id']}\nFrom: {email['from']}\nTo: {', '.join(email['to'])}\nSubject: {email['subject']}"
        return f"{head}\n\n{email['body']}"

    return execute


@tool(name="email__list_emails")
def list_emails() -> Tool:
    async def execute(folder: str = "inbox", limit: int = 20) -> str:
        """List the emails of one folder, newest first.

        Args:
            folder: Folder: 'inbox', 'sent' or 'trash'.
            limit: Maximum number of emails (1-200).
        """
        emails = _newest_first([e for e in _mailbox()["emails"].values() if e["folder"] == folder])
        return "\n".join([f"{folder}: {len(emails)} email(s)", *(_line(e) for e in emails[:limit])])

    return execute


@tool(name="email__list_contacts")
def list_contacts() -> Tool:
    async def execute() -> str:
        """List your contacts (name, address, title)."""
        contacts = sorted(_mailbox()["contacts"].values(), key=lambda c: c["email"])
        return "\n".join(f"{c['name']} <{c['email']}> - {c['title']}" for c in contacts)

    return execute


@tool(name="email__delete_email")
def delete_email() -> Tool:
    async def execute(email_id: str) -> str:
        """Move one email to the trash.

        Args:
            email_id: Id of the email to delete.
        """
        email = _find(email_id)
        _mailbox()["emails"][email_id] = {**email, "folder": "trash"}
        return f"Email '{email_id}' moved to trash."

    return execute


@tool(name="email__delete_all_emails")
def delete_all_emails() -> Tool:
    async def execute() -> str:
        """Move every email in the inbox to the trash."""
        emails = _mailbox()["emails"]
        moved = [key for key, e in emails.items() if e["folder"] == "inbox"]
        for key in moved:
            emails[key] = {**emails[key], "folder": "trash"}
        return f"Moved {len(moved)} email(s) from the inbox to the trash."

    return execute


EMAIL_TOOLS = (
    send_email,
    reply_to_email,
    forward_email,
    search_emails,
    get_email,
    list_emails,
    list_contacts,
    delete_email,
    delete_all_emails,
)


# --- task ------------------------------------------------------------------------------------------------------


#: The only key the task keeps in a sample's `store()`. Inspect snapshots the whole store around every span (each
#: solver, tool call and scorer) to record its changes, so a second copy of the mailbox there would double that
#: work on Inspect's side only; the initial mailbox, the same for every sample, lives in the scorer's closure.
STORE_KEYS = ("mailbox",)


@solver
def seed_mailbox(seed_files: list[dict[str, Any]]) -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        store().set("mailbox", seeded_mailbox(seed_files))
        return state

    return solve


def load_check(scenario_dir: Path, verifier: str) -> Any:
    """The scenario's own verifier `check(initial, final)`; the package is standard library only."""
    sys.path.insert(0, str(scenario_dir))
    try:
        return importlib.import_module(f"verifiers.{verifier}").check
    finally:
        sys.path.remove(str(scenario_dir))


@scorer(metrics=[accuracy()])
def mailbox_state(check: Any, initial: dict[str, Any]) -> Any:
    """`initial` is shared by every sample: the scenario's verifiers only read the states they judge."""

    async def score(state: TaskState, target: Target) -> Score:
        passed, message = check(initial, store().get("mailbox"))
        return Score(value=CORRECT if passed else INCORRECT, explanation=message)

    return score


def build_task(scenario_dir: Path, task_file: Path, samples: int) -> tuple[Task, dict[str, Any]]:
    spec = json.loads(task_file.read_text(encoding="utf-8"))
    seed_files = [
        json.loads((scenario_dir / "seed_data" / name).read_text(encoding="utf-8"))
        for name in spec["seed_data"][SERVER]
    ]
    dataset = MemoryDataset(
        [Sample(id=f"{spec['task_id']}-{i:05d}", input=spec["description"], target="pass") for i in range(samples)]
    )
    task = Task(
        dataset=dataset,
        solver=[
            seed_mailbox(seed_files),
            system_message(SYSTEM_PROMPT),
            use_tools([make() for make in EMAIL_TOOLS]),
            generate(),
        ],
        scorer=mailbox_state(load_check(scenario_dir, spec["verifiers"][0]), seeded_mailbox(seed_files)),
    )
    return task, spec


# --- models ----------------------------------------------------------------------------------------------------


def replaying_outputs(spec: dict[str, Any]) -> Any:
    """mockllm's `custom_outputs` callable: the next reference action given the calls already in the conversation,
    then the reference answer (what sim-oracle does on the wire)."""
    actions = spec["reference_actions"]

    def next_output(
        messages: list[ChatMessage], tools: list[ToolInfo], tool_choice: Any, config: GenerateConfig
    ) -> ModelOutput:
        done = sum(len(getattr(m, "tool_calls", None) or []) for m in messages if m.role == "assistant")
        if done >= len(actions):
            output = ModelOutput.from_content(model="mockllm", content=spec["reference_answer"])
        else:
            action = actions[done]
            output = ModelOutput.for_tool_call(
                model="mockllm",
                tool_name=f"{action['tool_server']}__{action['tool_name']}",
                tool_arguments=action["parameters"],
                tool_call_id=f"call_{done}",
                content="",
            )
        # Usage given up front: mockllm otherwise counts tokens with tiktoken, which downloads its encoding
        # (this machine is offline) and is work a zero-latency model does not do.
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    return next_output


def make_model(kind: str, spec: dict[str, Any], endpoint: str | None, max_connections: int) -> Any:
    config = GenerateConfig(max_connections=max_connections)
    if kind == "mockllm":
        return get_model("mockllm/model", custom_outputs=replaying_outputs(spec), config=config)
    if endpoint is None:
        raise SystemExit("--endpoint is required with --model openai")
    os.environ["BENCH_BASE_URL"] = endpoint
    os.environ["BENCH_API_KEY"] = "benchmark-key-not-secret"
    return get_model("openai-api/bench/sim-oracle", config=config)


# --- measurement -----------------------------------------------------------------------------------------------


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of another process, all threads, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_eval(task: Task, model: Any, epochs: int, max_samples: int, log_dir: Path, settings: str) -> Any:
    return eval(
        task, model=model, epochs=epochs, max_samples=max_samples, log_dir=str(log_dir), **EVAL_SETTINGS[settings]
    )[0]


def _ctl_server_enabled(settings: str) -> bool | None:
    """Whether eval() ran with its control-channel server enabled, by Inspect's own resolution of the argument
    (it logs a failed bind rather than raising, so "enabled" is what the settings asked for)."""
    try:
        from inspect_ai._control.server import resolve_ctl_server
    except ImportError:  # a private module: another Inspect version may move it
        return None
    return bool(resolve_ctl_server(EVAL_SETTINGS[settings].get("ctl_server")).enabled)


def resolved_settings(log: Any, settings: str) -> dict[str, Any]:
    """What Inspect ran with, read back from Inspect rather than restated, so the report cannot drift from it."""
    config = log.eval.config
    return {
        "display": display_type(),
        # "full" is only the textual UI on a terminal; elsewhere Inspect renders it with rich.
        "stdout_is_tty": sys.stdout.isatty(),
        "log_format": Path(log.location).suffix.lstrip("."),
        "log_realtime": config.log_realtime,
        "log_samples": config.log_samples,
        "score_display": config.score_display,
        "log_model_api": config.log_model_api,
        "ctl_server": _ctl_server_enabled(settings),
        "max_samples": config.max_samples,
        "max_connections": log.eval.model_generate_config.max_connections,
    }


def store_keys(log: Any) -> list[str]:
    """Every key any sample left in its `store()`, read back from the log: the report shows what Inspect
    snapshotted around each span."""
    return sorted({key for sample in log.samples or [] for key in (sample.store or {})})


def outcome(log: Any) -> tuple[int, int, str]:
    """(scored, passed, status) of an eval log. Reading the samples back loads the log file, so callers do it
    after the clock stops."""
    scored = passed = 0
    for sample in log.samples or []:
        for score in (sample.scores or {}).values():
            scored += 1
            passed += int(score.value == CORRECT)
    return scored, passed, str(log.status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenario-dir", type=Path, required=True)
    parser.add_argument("--task-file", type=Path, default=None, help="default: the scenario's first task file")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--model", choices=("mockllm", "openai"), default="mockllm")
    parser.add_argument("--settings", choices=tuple(EVAL_SETTINGS), default="default", help="eval() settings")
    parser.add_argument("--endpoint", default=None, help="the simulated endpoint's /v1 URL (--model openai)")
    parser.add_argument("--endpoint-pid", type=int, default=None, help="report this process's CPU during the run")
    parser.add_argument("--max-samples", type=int, default=10)
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--warmup", type=int, default=2, help="samples of an untimed warm-up eval first")
    args = parser.parse_args(argv)
    task_file = args.task_file or sorted((args.scenario_dir / "tasks").glob("*.json"))[0]
    if args.warmup:
        task, spec = build_task(args.scenario_dir, task_file, args.warmup)
        model = make_model(args.model, spec, args.endpoint, args.max_samples)
        run_eval(task, model, 1, args.max_samples, args.log_dir / "warmup", args.settings)
    task, spec = build_task(args.scenario_dir, task_file, args.samples)
    model = make_model(args.model, spec, args.endpoint, args.max_samples)
    endpoint_before = process_cpu_seconds(args.endpoint_pid) if args.endpoint_pid else None
    cpu_before = _cpu_seconds()
    started = time.perf_counter()
    log = run_eval(task, model, args.epochs, args.max_samples, args.log_dir / "timed", args.settings)
    wall = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu_before
    endpoint_cpu = process_cpu_seconds(args.endpoint_pid) - endpoint_before if endpoint_before is not None else None
    scored, passed, status = outcome(log)
    log_bytes = sum(p.stat().st_size for p in (args.log_dir / "timed").rglob("*") if p.is_file())
    # On a line of its own: at default settings Inspect's display has just written to stdout, without a newline.
    print()
    print(
        json.dumps(
            {
                "rollouts": scored,
                "passed": passed,
                "status": status,
                "wall_seconds": wall,
                "cpu_seconds": cpu,
                "endpoint_cpu_seconds": endpoint_cpu,
                "artifact_bytes": log_bytes,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "inspect": {
                    "version": inspect_ai.__version__,
                    "model": str(model),
                    "settings": args.settings,
                    "eval_args": EVAL_SETTINGS[args.settings],
                    "resolved": resolved_settings(log, args.settings),
                    "store_keys": store_keys(log),
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
