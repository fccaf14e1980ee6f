"""Import a SimLab task bundle as a scenario: `eval-pipelines import <bundle-dir> [--scenario-id ...]`.

A SimLab bundle (the hosted product's task format)::

    tasks/<name>.json        meta{task_id, display_name, difficulty, category}, task, apps, tool_servers,
                             seed_emails, seed_calendar_events, seed_group_channels, npcs [{id}],
                             verifiers [{func: python_module, module: collinear.scenarios.<x>.verifiers.<name>}]
    verifiers/<name>.py      verify(run_artifacts); `__init__.py` optional
    npcs/profiles.json       [{profile_id, first_name, last_name, email, ...}]   (optional)
    rubrics/<task_id>.md     (optional)

becomes a scenario folder the catalog loads (see `inputs.scenarios`): SimLab's server names map onto the
built-in servers, inline seeds become the built-in servers' seed files (one per task and server), NPC profiles
go to `npcs.json`, verifiers are copied into a package. Whatever has no place is reported per task with its
field named (`ImportReport.notes`); nothing is dropped silently. A task may also carry the catalog's own fields
(`reference_actions`, `reference_answer`, `rubric`, ...), which are kept.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipelines.inputs.scenarios import (
    ScenarioError,
    ScenarioFiles,
    partition_key,
    read_json_file,
    resolves_inside,
    staged_scenario_folder,
)
from eval_pipelines.schemas.hosted import SIMLAB_SERVER_NAMES, VERIFIER_ENTRY_FUNC, verifier_module_name
from eval_pipelines.schemas.limits import MAX_PLAIN_NAME_CHARS
from eval_pipelines.schemas.scenarios import Rubric, Task, Template, TemplateToolServer, is_plain_name, plain_name_error

#: Keys of a SimLab task file that are read here (the rest is reported).
_READ_KEYS = {
    "meta",
    "task",
    "name",
    "description",
    "difficulty",
    "category",
    "apps",
    "tool_servers",
    "seed_emails",
    "seed_calendar_events",
    "seed_group_channels",
    "npcs",
    "verifiers",
}
#: The catalog's own task fields a bundle may carry as they are.
_CATALOG_KEYS = {"reference_actions", "reference_answer", "rubric", "npc_secrets", "mcp_servers", "version"}
#: `meta` keys that are read, or are SimLab bookkeeping with no effect on a run.
_META_KEYS = {"task_id", "display_name", "difficulty", "category", "version", "idempotent"}
SEED_TIMESTAMP = "2025-01-06T09:00:00Z"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class BundleImportError(ValueError):
    """The bundle cannot become a scenario; the message names the file and the field."""


@dataclass
class ImportReport:
    scenario_id: str
    folder: Path
    tasks: list[str] = field(default_factory=list)
    #: task id (or `bundle`) -> what could not be mapped, each naming its field
    notes: dict[str, list[str]] = field(default_factory=dict)

    def note(self, where: str, text: str) -> None:
        self.notes.setdefault(where, []).append(text)


def _read_json(path: Path, bundle: Path) -> Any:
    """A JSON file of the bundle, read like a scenario's: never through a link out of the bundle, never nested
    past the parser's stack."""
    try:
        return read_json_file(path, bundle)
    except ScenarioError as exc:
        raise BundleImportError(str(exc)) from None


def default_scenario_id(bundle: Path) -> str:
    name = _UNSAFE.sub("_", bundle.resolve().name).strip("_.-") or "imported"
    version = ":1.0.0"
    return f"{name[: MAX_PLAIN_NAME_CHARS - len(version)]}{version}"


def import_bundle(
    bundle: Path, scenarios_dir: Path, scenario_id: str | None = None, *, overwrite: bool = False
) -> ImportReport:
    """Write the bundle as scenario `scenario_id` under `scenarios_dir` (staged, then renamed into place)."""
    bundle = Path(bundle)
    task_files = sorted((bundle / "tasks").glob("*.json"))
    if not task_files:
        raise BundleImportError(f"{bundle / 'tasks'}: no task files (*.json); is this a SimLab task bundle?")
    scenario_id = scenario_id or default_scenario_id(bundle)
    try:
        Template(scenario_id=scenario_id, name=scenario_id)
    except ValueError as exc:
        raise BundleImportError(f"--scenario-id {scenario_id!r}: {exc}") from None
    target = Path(scenarios_dir) / partition_key(scenario_id)
    if target.exists() and not overwrite:
        raise BundleImportError(f"{target} already exists (pass --overwrite to replace it)")
    report = ImportReport(scenario_id=scenario_id, folder=target)
    with staged_scenario_folder(target) as staging:
        profiles = _copy_profiles(bundle, staging, report)
        _copy_verifiers(bundle, staging)
        servers: list[str] = []
        for path in task_files:
            task = _import_task(path, bundle, staging, profiles, report)
            for ref in task["tool_servers"]:
                if ref["name"] not in servers:
                    servers.append(ref["name"])
            _write_json(staging / "tasks" / f"{task['task_id']}.json", task)
            report.tasks.append(task["task_id"])
        template = Template(
            scenario_id=scenario_id,
            name=scenario_id.partition(":")[0].replace("_", " ").capitalize(),
            description=f"Imported from the SimLab task bundle {bundle.resolve().name}.",
            tool_servers=[TemplateToolServer(name=name) for name in servers],
        )
        _write_json(staging / "template.json", template.model_dump(exclude={"num_tasks", "num_npcs"}))
        try:
            ScenarioFiles(root=staging, template=template).tasks()
        except ScenarioError as exc:
            raise BundleImportError(f"the imported scenario does not load: {exc}") from None
    return report


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _copy_profiles(bundle: Path, staging: Path, report: ImportReport) -> dict[str, dict[str, Any]]:
    path = bundle / "npcs" / "profiles.json"
    if not path.is_file():
        return {}
    raw = _read_json(path, bundle)
    if not isinstance(raw, list):
        raise BundleImportError(f"{path}: expected a JSON list of NPC profiles")
    profiles: dict[str, dict[str, Any]] = {}
    for pos, item in enumerate(raw):
        missing = [k for k in ("profile_id", "first_name", "last_name", "email") if not (item or {}).get(k)]
        if not isinstance(item, dict) or missing:
            report.note("bundle", f"npcs/profiles.json[{pos}]: missing {missing}; profile left out")
            continue
        profiles[str(item["profile_id"])] = {
            "profile_id": str(item["profile_id"]),
            "first_name": str(item["first_name"]),
            "last_name": str(item["last_name"]),
            "email": str(item["email"]),
            "occupation": str(item.get("occupation") or item.get("title") or ""),
            "public_info": item.get("public_info") or item.get("bio"),
        }
    if profiles:
        _write_json(staging / "npcs.json", list(profiles.values()))
    return profiles


def _copy_verifiers(bundle: Path, staging: Path) -> None:
    target = staging / "verifiers"
    target.mkdir(parents=True)
    source = bundle / "verifiers"
    if source.is_dir() and not resolves_inside(source, bundle):
        raise BundleImportError(f"{source}: is a link to a folder outside {bundle}; nothing is copied from it")
    for path in sorted(source.glob("*.py")) if source.is_dir() else []:
        if path.is_symlink() or not path.is_file():
            continue  # a bundle's link could point anywhere on this machine; only its own files are copied
        shutil.copyfile(path, target / path.name)
    if not (target / "__init__.py").exists():
        # SimLab bundles may leave the package implicit; the catalog imports verifiers as a package.
        (target / "__init__.py").write_text('"""Verifiers imported from a SimLab task bundle."""\n')


def _import_task(
    path: Path, bundle: Path, staging: Path, profiles: dict[str, dict[str, Any]], report: ImportReport
) -> dict[str, Any]:
    raw = _read_json(path, bundle)
    if not isinstance(raw, dict):
        raise BundleImportError(f"{path}: expected a JSON object")
    meta: dict[str, Any] = raw["meta"] if isinstance(raw.get("meta"), dict) else {}
    task_id = meta.get("task_id") or raw.get("task_id")
    if not isinstance(task_id, str) or not task_id.strip():
        raise BundleImportError(f"{path}: meta.task_id: required")
    if not is_plain_name(task_id):
        # it names the task's files (tasks/<id>.json, seed files, rubrics/<id>.md): never a path
        raise BundleImportError(f"{path}: meta.task_id: {plain_name_error(task_id)}")
    description = raw.get("task") or raw.get("description")
    if not isinstance(description, str) or not description.strip():
        raise BundleImportError(f"{path}: task: required (the instruction given to the agent)")
    for key in sorted(set(raw) - _READ_KEYS - _CATALOG_KEYS - {"task_id"}):
        report.note(task_id, f"{key}: has no place in a scenario task; left out")
    for key in sorted(set(meta) - _META_KEYS):
        report.note(task_id, f"meta.{key}: has no place in a scenario task; left out")
    servers = _map_servers(raw, task_id, report)
    task: dict[str, Any] = {
        "task_id": task_id,
        "name": str(meta.get("display_name") or raw.get("name") or task_id),
        "difficulty": str(meta.get("difficulty") or raw.get("difficulty") or "medium"),
        "category": str(meta.get("category") or _category(raw.get("category"))),
        "description": description,
        **{key: raw[key] for key in _CATALOG_KEYS if key in raw},
    }
    seed_data = _write_seeds(raw, task_id, staging, profiles, servers, report)
    task["tool_servers"] = [{"name": name} for name in servers]
    task["simlab_servers"] = servers
    task["seed_data"] = seed_data
    task["npc_profiles"] = _npc_ids(raw, task_id, profiles, report)
    task["verifiers"] = _verifier_names(raw, task_id, staging, report)
    rubric = bundle / "rubrics" / f"{task_id}.md"
    if rubric.is_file() and not resolves_inside(rubric, bundle):
        raise BundleImportError(f"{rubric}: is a link to a file outside {bundle}; it is not read")
    if "rubric" not in task and rubric.is_file():
        task["rubric"] = _rubric(task_id, task["name"], rubric.read_text(encoding="utf-8"))
    try:
        Task.model_validate({**task, "npc_profiles": []})  # profile ids are resolved when the catalog loads
    except ValueError as exc:
        raise BundleImportError(f"{path}: {exc}") from None
    return task


def _category(value: Any) -> str:
    # SimLab marks ordinary tasks `category: task` and hidden ones `test`; neither is a topic.
    return "general" if value in (None, "", "task") else str(value)


def _map_servers(raw: dict[str, Any], task_id: str, report: ImportReport) -> dict[str, str]:
    """Built-in server -> the name the task gave it, in the task's order."""
    servers: dict[str, str] = {}
    refs = raw.get("tool_servers") or []
    for pos, ref in enumerate(refs if isinstance(refs, list) else []):
        name = ref.get("name") if isinstance(ref, dict) else ref
        mapped = SIMLAB_SERVER_NAMES.get(str(name).lower()) if name else None
        if mapped is None:
            report.note(task_id, f"tool_servers[{pos}].name {name!r}: no built-in server plays its part; left out")
        else:
            servers.setdefault(mapped, str(name))
    if not servers:
        for app in raw.get("apps") or []:
            mapped = SIMLAB_SERVER_NAMES.get(str(app).lower())
            if mapped is not None:
                servers.setdefault(mapped, str(app))
    return servers


def _write_seeds(
    raw: dict[str, Any],
    task_id: str,
    staging: Path,
    profiles: dict[str, dict[str, Any]],
    servers: dict[str, str],
    report: ImportReport,
) -> dict[str, list[str]]:
    seeds: dict[str, Any] = {}
    if raw.get("seed_emails"):
        seeds["email"] = _mailbox(raw["seed_emails"], profiles, task_id, report)
    if raw.get("seed_calendar_events"):
        seeds["calendar"] = _calendar(raw["seed_calendar_events"], task_id, report)
    if raw.get("seed_group_channels"):
        seeds["chat"] = _channels(raw["seed_group_channels"], profiles, task_id, report)
    seed_data: dict[str, list[str]] = {}
    for server, content in seeds.items():
        if content is None:
            continue
        servers.setdefault(server, server)  # the task seeds it, so the agent works on it
        filename = f"{task_id}_{server}.json"
        _write_json(staging / "seed_data" / filename, content)
        seed_data[server] = [filename]
    return seed_data


def _address(value: Any, profiles: dict[str, dict[str, Any]]) -> str:
    text = str(value or "").strip()
    if text in profiles:
        return str(profiles[text]["email"])
    return text if "@" in text else f"{text}@example.com"


def _mailbox(
    emails: Any, profiles: dict[str, dict[str, Any]], task_id: str, report: ImportReport
) -> dict[str, Any] | None:
    if not isinstance(emails, list):
        report.note(task_id, "seed_emails: expected a list; left out")
        return None
    items = []
    for pos, email in enumerate(emails):
        if not isinstance(email, dict) or not email.get("to_addr") or not email.get("subject"):
            report.note(task_id, f"seed_emails[{pos}]: needs to_addr and subject; left out")
            continue
        if email.get("body_html"):
            report.note(task_id, f"seed_emails[{pos}].body_html: the mail server keeps plain text; body_text kept")
        items.append(
            {
                "id": f"seed-{pos + 1:03d}",
                "from": _address(email.get("from_profile_id"), profiles),
                "to": [a.strip() for a in str(email["to_addr"]).split(",") if a.strip()],
                "subject": str(email["subject"]),
                "body": str(email.get("body_text") or ""),
                "timestamp": str(email.get("timestamp") or SEED_TIMESTAMP),
            }
        )
    if not items:
        return None
    # The mailbox belongs to whoever the seed mail is addressed to most: the agent.
    account = Counter(a for item in items for a in item["to"]).most_common(1)[0][0]
    return {"account": account, "emails": items}


def _calendar(events: Any, task_id: str, report: ImportReport) -> dict[str, Any] | None:
    if not isinstance(events, list):
        report.note(task_id, "seed_calendar_events: expected a list; left out")
        return None
    items, accounts = [], Counter[str]()
    for pos, event in enumerate(events):
        if not isinstance(event, dict) or not all(event.get(k) for k in ("summary", "start", "end")):
            report.note(task_id, f"seed_calendar_events[{pos}]: needs summary, start and end; left out")
            continue
        if event.get("account"):
            accounts[str(event["account"])] += 1
        items.append(
            {
                "id": f"seed-evt-{pos + 1:03d}",
                "calendar_uid": "primary",
                "title": str(event["summary"]),
                "start": str(event["start"]),
                "end": str(event["end"]),
                "description": str(event.get("description") or ""),
                "attendees": [str(a) for a in event.get("attendees") or []],
            }
        )
    if not items:
        return None
    seed: dict[str, Any] = {"events": items}
    if accounts and "@" in (account := accounts.most_common(1)[0][0]):
        seed["account"] = account
    return seed


def _channels(
    channels: Any, profiles: dict[str, dict[str, Any]], task_id: str, report: ImportReport
) -> dict[str, Any] | None:
    if not isinstance(channels, list):
        report.note(task_id, "seed_group_channels: expected a list; left out")
        return None
    items = []
    for pos, channel in enumerate(channels):
        name = (
            str((channel or {}).get("channel_name") or "").strip().lstrip("#").lower()
            if isinstance(channel, dict)
            else ""
        )
        if not name:
            report.note(task_id, f"seed_group_channels[{pos}]: needs channel_name; left out")
            continue
        messages = []
        for index, message in enumerate(channel.get("messages") or []):
            text = (message or {}).get("text") or (message or {}).get("message") if isinstance(message, dict) else None
            if not text:
                report.note(task_id, f"seed_group_channels[{pos}].messages[{index}]: no text; left out")
                continue
            messages.append({"from": _address(message.get("from_profile_id"), profiles), "text": str(text)})
        items.append({"name": name, "topic": str(channel.get("topic") or ""), "messages": messages})
    return {"channels": items} if items else None


def _npc_ids(raw: dict[str, Any], task_id: str, profiles: dict[str, dict[str, Any]], report: ImportReport) -> list[str]:
    ids = []
    for pos, npc in enumerate(raw.get("npcs") or []):
        profile_id = str((npc or {}).get("id") or "") if isinstance(npc, dict) else str(npc)
        if profile_id in profiles:
            ids.append(profile_id)
        else:
            report.note(task_id, f"npcs[{pos}].id {profile_id!r}: not in npcs/profiles.json; left out")
    return ids


def _verifier_names(raw: dict[str, Any], task_id: str, staging: Path, report: ImportReport) -> list[str]:
    names = []
    for pos, entry in enumerate(raw.get("verifiers") or []):
        if isinstance(entry, dict) and entry.get("func", VERIFIER_ENTRY_FUNC) != VERIFIER_ENTRY_FUNC:
            report.note(task_id, f"verifiers[{pos}].func {entry.get('func')!r}: only python_module runs here; left out")
            continue
        name = verifier_module_name(entry)
        if not isinstance(name, str) or not (staging / "verifiers" / f"{name}.py").is_file():
            report.note(task_id, f"verifiers[{pos}]: {name!r} has no file verifiers/{name}.py; left out")
            continue
        names.append(name)
    return names


def _rubric(task_id: str, name: str, markdown: str) -> dict[str, Any]:
    title = next((line[2:].strip() for line in markdown.splitlines() if line.startswith("# ")), name)
    return Rubric(task_id=task_id, title=title, overview=markdown.strip()).model_dump()
