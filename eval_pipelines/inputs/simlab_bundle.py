"""Import a SimLab task bundle as a scenario: `eval-pipelines import <bundle-dir> [--servers FILE] ...`.

A SimLab bundle (the hosted product's task format)::

    tasks/<name>.json        meta{task_id, display_name | name, difficulty, category, apps}, task | instruction,
                             name, category, apps, tool_servers [{name, tool_server_url}], seed_emails,
                             seed_calendar_events, seed_group_channels,
                             npcs [{id, name, role, traits, context, quirks, secret}]  (see `inputs.simlab_npcs`),
                             verifiers [{func: python_module, module: collinear.scenarios.<x>.verifiers.<name>
                                         | simlab.verifiers.<name>}]  (else `evaluators`, as SimLab reads it)
                             simulated_servers {name: {tools}}  (generated from a user's own toolset: each
                                         becomes servers/<name>.json, served by the tool host)
    verifiers/<name>.py      verify(run_artifacts); `__init__.py` optional
    npcs/profiles.json       [{profile_id, first_name, last_name, email, occupation, public_info,
                               rocketchat_username, ...}]   (optional)
    rubrics/<task_id>.md     (optional)
    mcp-servers.json         SimLab's MCP servers (here or in the folder above; see `inputs.simlab_servers`)
    ../env.yaml              SimLab's environment config: what of it has no place here is reported

becomes a scenario folder the catalog loads (see `inputs.scenarios`). Every server, app, NPC and verifier of a
task maps to something that runs (a built-in server, a server the user named, a profile, a verifier file), or
the task is kept but marked unrunnable with the reason (`Task.unrunnable_reason`; sweeps leave it out and say
so); a task file without an id or an instruction refuses the whole bundle. Verifier modules resolve as SimLab
resolves them: the bundle's `verifiers/<last part of the module path>.py` first, then, for
`simlab.verifiers.<name>`, the SimLab package given (or installed). What is data with no place (an unseedable
email, an unknown key) is reported per task with its field named (`ImportReport.notes`). What the bundle said
of each task is kept (`Task.simlab_origin`), so the scenario can be served back under the bundle's names; a task
may also carry the catalog's own fields (`reference_actions`, `reference_answer`, `rubric`, ...), kept as they
are.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eval_pipelines.inputs.scenarios import (
    ScenarioError,
    ScenarioFiles,
    partition_key,
    read_json_file,
    resolves_inside,
    safe_relative_path,
    staged_scenario_folder,
)
from eval_pipelines.inputs.simlab_npcs import PROFILES_FILE, TaskNpcs, profiles_from, task_npcs
from eval_pipelines.inputs.simlab_seeds import seed_contents
from eval_pipelines.inputs.simlab_servers import (
    NamedServers,
    ServersFileError,
    TaskServers,
    discover_servers,
    mcp_server_entry,
    resolve_task_servers,
)
from eval_pipelines.schemas.hosted import (
    SIMLAB_NPC_CHAT_SERVER,
    SIMLAB_SERVER_NAMES,
    SIMLAB_VERIFIER_PACKAGE,
    VERIFIER_ENTRY_FUNC,
)
from eval_pipelines.schemas.limits import MAX_PLAIN_NAME_CHARS
from eval_pipelines.schemas.scenarios import (
    MAX_SCENARIO_GUIDANCE_CHARS,
    SCENARIO_GUIDANCE_FILE,
    SIMULATED_SERVERS_DIR,
    SIMULATED_SERVERS_KEY,
    Rubric,
    SimulatedServer,
    Task,
    Template,
    TemplateToolServer,
    is_plain_name,
    plain_name_error,
)

#: Keys of a SimLab task file that are read here (the rest is reported).
_READ_KEYS = {
    "meta",
    "task",
    "instruction",
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
    "evaluators",
    # a generated bundle's (taskgen.drafts.task_json): its seed files inline, and the profiles `npcs` names
    "seed_files",
    "seed_data",
    "npc_profiles",
    # a bundle generated from a user's own toolset: the tool definitions of each server nobody built in plays
    SIMULATED_SERVERS_KEY,
}
#: Keys that hold the instruction, in the order they are looked for: SimLab's `task`, the `instruction` some of
#: its cookbook's bundles use, the catalog's `description`.
_TEXT_KEYS = ("task", "instruction", "description")
#: Task fields the import sets itself; a bundle's task may carry every other field of the catalog's, kept as it is.
_SET_HERE = {
    "task_id",
    "name",
    "category",
    "difficulty",
    "description",
    "tool_servers",
    "simlab_servers",
    "seed_data",
    "npc_profiles",
    "verifiers",
    "http_servers",
    "unrunnable_reason",
    "simlab_origin",
}
_CATALOG_KEYS = set(Task.model_fields) - _SET_HERE
#: `meta` keys that are read, or are SimLab bookkeeping with no effect on a run.
_META_KEYS = {"task_id", "display_name", "name", "difficulty", "category", "apps", "version", "idempotent"}
#: SimLab's environment config, beside the bundle: what of it is read here.
_ENV_FILE = "env.yaml"
_ENV_READ_KEYS = {"name", "tools", "scenario_guidance_md"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
NOTHING_GRADES = "nothing grades it: no verifier and no rubric"
#: the built-in server that plays SimLab's NPC chat (and its rocketchat)
_CHAT = SIMLAB_SERVER_NAMES[SIMLAB_NPC_CHAT_SERVER]


class BundleImportError(ValueError):
    """The bundle cannot become a scenario; the message names the file and the field."""


@dataclass
class ImportReport:
    scenario_id: str
    folder: Path
    tasks: list[str] = field(default_factory=list)
    #: task id (or `bundle`) -> what could not be mapped, each naming its field
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: task id -> why it cannot run (it is in the scenario, marked, and sweeps leave it out)
    unrunnable: dict[str, str] = field(default_factory=dict)

    def note(self, where: str, text: str) -> None:
        self.notes.setdefault(where, []).append(text)

    def lines(self) -> list[str]:
        """What `eval-pipelines import` prints: every task runnable or not with the reason, then the notes."""
        out = [f"scenario {self.scenario_id}: {len(self.tasks)} task(s) in {self.folder}"]
        for task_id in self.tasks:
            reason = self.unrunnable.get(task_id)
            out.append(f"  {task_id}: " + (f"UNRUNNABLE: {reason}" if reason else "runnable"))
        for where, notes in self.notes.items():
            out.extend(f"  {where}: note: {note}" for note in notes)
        return out


@dataclass
class _Import:
    """One import's inputs and what it has gathered so far."""

    bundle: Path
    staging: Path
    report: ImportReport
    servers: NamedServers
    simlab_package: Path | None
    allow_ungraded: bool
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the simulated servers the tasks define (`simulated_servers`), by name: one definition per name
    simulated: dict[str, SimulatedServer] = field(default_factory=dict)


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


def installed_simlab_package() -> Path | None:
    """The folder of an installed `simlab` package in this interpreter, found without importing it."""
    spec = importlib.util.find_spec("simlab")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def import_bundle(
    bundle: Path,
    scenarios_dir: Path,
    scenario_id: str | None = None,
    *,
    overwrite: bool = False,
    servers_file: Path | None = None,
    simlab_package: Path | None = None,
    allow_ungraded: bool = False,
) -> ImportReport:
    """Write the bundle as scenario `scenario_id` under `scenarios_dir` (staged, then renamed into place).

    `servers_file` names the servers nobody built in plays (see `inputs.simlab_servers`); `simlab_package` is a
    SimLab package folder (`.../simlab`) to take `simlab.verifiers.<name>` modules from when the bundle has no
    file for them (default: an installed one); `allow_ungraded` keeps a task with no verifier and no rubric
    runnable."""
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
    try:
        named = discover_servers(bundle, servers_file)
    except ServersFileError as exc:
        raise BundleImportError(str(exc)) from None
    report = ImportReport(scenario_id=scenario_id, folder=target)
    for name, source in named.sources.items():
        report.note("bundle", f"server {name!r}: named in {source}")
    with staged_scenario_folder(target) as staging:
        job = _Import(bundle, staging, report, named, simlab_package or installed_simlab_package(), allow_ungraded)
        _read_env_config(bundle, named, report, staging)
        job.profiles = _read_profiles(bundle, report)
        _copy_verifiers(bundle, staging)
        servers: list[str] = []
        for path in task_files:
            task = _import_task(path, job)
            servers.extend(ref["name"] for ref in task["tool_servers"] if ref["name"] not in servers)
            _write_json(staging / "tasks" / f"{task['task_id']}.json", task)
            report.tasks.append(task["task_id"])
            if task.get("unrunnable_reason"):
                report.unrunnable[task["task_id"]] = task["unrunnable_reason"]
        for server in job.simulated.values():
            _write_json(staging / SIMULATED_SERVERS_DIR / f"{server.name}.json", server.model_dump(mode="json"))
        if job.profiles:  # the bundle's, and those made for NPCs it gives no profile
            _write_json(staging / "npcs.json", list(job.profiles.values()))
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


def _read_env_config(bundle: Path, named: NamedServers, report: ImportReport, staging: Path) -> None:
    """Report what of SimLab's `env.yaml` (in or beside the bundle) has no place here: its tools (apps) that no
    server plays, and its setup scripts, mounted fixtures and skills (the environment's own). Its
    `scenario_guidance_md`, which SimLab's `tasks run` appends to every instruction, becomes the scenario's
    guidance file, served back as the template's `scenario_guidance_md`."""
    for folder in (bundle, bundle.parent):
        path = folder / _ENV_FILE
        if not path.is_file() or path.is_symlink():
            continue
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise BundleImportError(f"{path}: cannot be read: {exc}") from None
        if not isinstance(raw, dict):
            raise BundleImportError(f"{path}: expected a mapping (SimLab's environment config)")
        for key in sorted(set(raw) - _ENV_READ_KEYS):
            report.note("bundle", f"{path.name}: {key}: the environment's, not reproduced here; left out")
        tools = _list(raw.get("tools"))
        for problem in resolve_task_servers([], tools, named).problems:
            report.note("bundle", f"{path.name}: tools: {problem.removeprefix('apps')}")
        _import_guidance(raw.get("scenario_guidance_md"), path, report, staging)
        return


def _import_guidance(guidance: Any, source: Path, report: ImportReport, staging: Path) -> None:
    if not isinstance(guidance, str) or not guidance.strip():
        return
    if len(guidance.strip()) > MAX_SCENARIO_GUIDANCE_CHARS:
        report.note(
            "bundle", f"{source.name}: scenario_guidance_md: over {MAX_SCENARIO_GUIDANCE_CHARS} characters; left out"
        )
        return
    (staging / SCENARIO_GUIDANCE_FILE).write_text(guidance.strip() + "\n", encoding="utf-8")
    report.note("bundle", f"{source.name}: scenario_guidance_md: the scenario's guidance ({SCENARIO_GUIDANCE_FILE})")


def _read_profiles(bundle: Path, report: ImportReport) -> dict[str, dict[str, Any]]:
    path = bundle / PROFILES_FILE
    if not path.is_file():
        return {}
    raw = _read_json(path, bundle)
    if not isinstance(raw, list):
        raise BundleImportError(f"{path}: expected a JSON list of NPC profiles")
    return profiles_from(raw, report.note)


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


def _task_text(raw: dict[str, Any], path: Path) -> tuple[str, str]:
    for key in _TEXT_KEYS:
        text = raw.get(key)
        if isinstance(text, str) and text.strip():
            return key, text
    raise BundleImportError(f"{path}: task: required (the instruction given to the agent; or instruction)")


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _apps(raw: dict[str, Any], meta: dict[str, Any]) -> list[Any]:
    return _list(raw.get("apps")) if isinstance(raw.get("apps"), list) else _list(meta.get("apps"))


def _task_id(raw: dict[str, Any], meta: dict[str, Any], path: Path) -> str:
    task_id = meta.get("task_id") or raw.get("task_id")
    if not isinstance(task_id, str) or not task_id.strip():
        raise BundleImportError(f"{path}: meta.task_id: required")
    if not is_plain_name(task_id):
        # it names the task's files (tasks/<id>.json, seed files, rubrics/<id>.md): never a path
        raise BundleImportError(f"{path}: meta.task_id: {plain_name_error(task_id)}")
    return task_id


def _import_task(path: Path, job: _Import) -> dict[str, Any]:
    raw = _read_json(path, job.bundle)
    if not isinstance(raw, dict):
        raise BundleImportError(f"{path}: expected a JSON object")
    meta: dict[str, Any] = raw["meta"] if isinstance(raw.get("meta"), dict) else {}
    task_id = _task_id(raw, meta, path)
    text_key, description = _task_text(raw, path)
    report = job.report
    for key in sorted(set(raw) - _READ_KEYS - _CATALOG_KEYS - {"task_id"}):
        if key in _SET_HERE and raw[key] in (None, "", [], {}):
            continue  # a generated task's empty field: nothing is lost
        report.note(task_id, f"{key}: has no place in a scenario task; left out")
    for key in sorted(set(meta) - _META_KEYS):
        report.note(task_id, f"meta.{key}: has no place in a scenario task; left out")
    refs = _list(raw.get("tool_servers"))
    apps = _apps(raw, meta)
    simulated = _simulated_servers(raw, path, job)
    plan = resolve_task_servers(
        [ref for ref in refs if _ref_name(ref) not in simulated],
        [app for app in apps if app not in simulated],
        job.servers,
    )
    npcs = task_npcs(raw.get("npcs"), task_id, job.profiles, _dict(raw.get("npc_secrets")), report.note)
    if npcs.chat_seed is not None:
        plan.builtin.setdefault(_CHAT, SIMLAB_NPC_CHAT_SERVER)  # SimLab gives the task its NPC chat
    task: dict[str, Any] = {
        "task_id": task_id,
        "name": str(meta.get("display_name") or meta.get("name") or raw.get("name") or task_id),
        "difficulty": str(meta.get("difficulty") or raw.get("difficulty") or "medium"),
        "category": str(meta.get("category") or _category(raw.get("category"))),
        "description": description,
        **{key: raw[key] for key in _CATALOG_KEYS if key in raw},
    }
    task["seed_data"] = _write_seeds(raw, task_id, job, plan)
    task["tool_servers"] = [{"name": name} for name in [*plan.builtin, *simulated]]
    task["simlab_servers"] = {**plan.builtin, **{name: name for name in simulated}}
    _add_named_servers(task, plan, task_id, report)
    problems = [*plan.problems, *npcs.problems]
    _add_npcs(task, npcs, job, plan)
    task["verifiers"] = _verifier_names(raw, job, problems)
    rubric = job.bundle / "rubrics" / f"{task_id}.md"
    if rubric.is_file() and not resolves_inside(rubric, job.bundle):
        raise BundleImportError(f"{rubric}: is a link to a file outside {job.bundle}; it is not read")
    if "rubric" not in task and rubric.is_file():
        task["rubric"] = _rubric(task_id, task["name"], rubric.read_text(encoding="utf-8"))
    if not _verifier_entries(raw)[1] and not task.get("rubric") and not job.allow_ungraded:
        problems.append(NOTHING_GRADES)
    task["unrunnable_reason"] = "; ".join(problems) or None
    task["simlab_origin"] = _origin(raw, meta, apps, refs, text_key)
    try:
        Task.model_validate({**task, "npc_profiles": []})  # profile ids are resolved when the catalog loads
    except ValueError as exc:
        raise BundleImportError(f"{path}: {exc}") from None
    return task


def _ref_name(ref: Any) -> str:
    return str((ref.get("name") if isinstance(ref, dict) else ref) or "").strip()


def _simulated_servers(raw: dict[str, Any], path: Path, job: _Import) -> list[str]:
    """The names of the simulated servers the task defines (SimLab's `tasks-gen run --out` from a user's own
    toolset keeps each one's tools in the task file). Each becomes the scenario's `servers/<name>.json`, served
    by the tool host as a stand-in built from those tools; two tasks may not give one name different tools."""
    entries = raw.get(SIMULATED_SERVERS_KEY)
    if entries in (None, {}):
        return []
    if not isinstance(entries, dict):
        raise BundleImportError(f"{path}: {SIMULATED_SERVERS_KEY}: expected an object of server name -> tools")
    names = []
    for name, definition in entries.items():
        where = f"{path}: {SIMULATED_SERVERS_KEY}.{name}"
        if not isinstance(definition, dict):
            raise BundleImportError(f"{where}: expected an object with the server's tools")
        try:
            server = SimulatedServer.model_validate({**definition, "name": name})
        except ValueError as exc:
            raise BundleImportError(f"{where}: {exc}") from None
        if job.simulated.setdefault(server.name, server) != server:
            raise BundleImportError(f"{where}: another task gives server {server.name!r} different tools")
        names.append(server.name)
    return names


def _origin(
    raw: dict[str, Any], meta: dict[str, Any], apps: list[Any], refs: list[Any], text_key: str
) -> dict[str, Any]:
    """What the bundle said of the task that the scenario's own fields do not keep."""
    servers = [
        {"name": str(ref.get("name")), "tool_server_url": str(ref.get("tool_server_url") or "")}
        for ref in refs
        if isinstance(ref, dict) and ref.get("name")
    ]
    origin: dict[str, Any] = {"meta": meta, "apps": apps, "tool_servers": servers, "text_key": text_key}
    if "category" in raw:
        origin["category"] = raw["category"]
    return origin


def _add_named_servers(task: dict[str, Any], plan: TaskServers, task_id: str, report: ImportReport) -> None:
    """The user-named servers the task uses: MCP ones into `mcp_servers`, spec 001 HTTP ones into
    `http_servers`, each under the name the bundle gave it (which its verifiers read)."""
    mcp = list(task.get("mcp_servers") or [])
    http: dict[str, str] = {}
    for name, server in plan.named.items():
        if server.is_mcp:
            entry, secrets = mcp_server_entry(name, server)
            mcp.append(entry)
            if secrets:
                report.note(task_id, f"server {name!r}: {secrets} are read from the environment when it starts")
        elif server.url is not None:
            http[name] = server.url
    if mcp:
        task["mcp_servers"] = mcp
    if http:
        task["http_servers"] = http


def _category(value: Any) -> str:
    # SimLab marks ordinary tasks `category: task` and hidden ones `test`; neither is a topic.
    return "general" if value in (None, "", "task") else str(value)


def _write_seeds(raw: dict[str, Any], task_id: str, job: _Import, plan: TaskServers) -> dict[str, list[str]]:
    """The task's seeds as seed files: SimLab's inline lists, and a generated bundle's `seed_data` + inline
    `seed_files`. A seeded built-in server joins the task's servers: the agent works on it."""
    seed_data: dict[str, list[str]] = {}
    for server, content in seed_contents(raw, task_id, job.profiles, job.report.note).items():
        plan.builtin.setdefault(server, server)
        filename = f"{task_id}_{server}.json"
        _write_json(job.staging / "seed_data" / filename, content)
        seed_data[server] = [filename]
    inline = _dict(raw.get("seed_files"))
    named = _dict(raw.get("seed_data"))
    for server, files in named.items():
        for name in files if isinstance(files, list) else []:
            if name not in inline:
                job.report.note(task_id, f"seed_data.{server}: {name!r} is not in seed_files; left out")
                continue
            try:
                relative = safe_relative_path(str(name))
            except ValueError as exc:
                raise BundleImportError(f"{task_id}: seed_data.{server}: {exc}") from None
            _write_json(job.staging / "seed_data" / relative, inline[name])
            seed_data.setdefault(str(server), []).append(str(relative))
            if str(server) in SIMLAB_SERVER_NAMES.values():
                plan.builtin.setdefault(str(server), str(server))
    return seed_data


def _add_npcs(task: dict[str, Any], npcs: TaskNpcs, job: _Import, plan: TaskServers) -> None:
    """The task's NPC profiles, the chat seed of those SimLab's NPC chat plays, and their secrets (never listed:
    `npc_secrets`; the task's own win)."""
    task_id = task["task_id"]
    task["npc_profiles"] = npcs.ids
    if npcs.chat_seed is not None:
        filename = f"{task_id}_npc_chat.json"
        _write_json(job.staging / "seed_data" / filename, npcs.chat_seed)
        task["seed_data"].setdefault(_CHAT, []).append(filename)
    if npcs.secrets:
        task["npc_secrets"] = {**npcs.secrets, **_dict(task.get("npc_secrets"))}
    if _CHAT not in plan.builtin:
        for where in npcs.secret_fields:
            job.report.note(task_id, f"{where}: kept, but the task has no chat server: no conversation can reveal it")


def _verifier_names(raw: dict[str, Any], job: _Import, problems: list[str]) -> list[str]:
    """The module names of the task's verifiers, each resolved as SimLab resolves it (see the module doc)."""
    names = []
    key, entries = _verifier_entries(raw)
    for pos, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("func", VERIFIER_ENTRY_FUNC) != VERIFIER_ENTRY_FUNC:
            problems.append(f"{key}[{pos}].func {entry.get('func')!r}: only python_module runs here")
            continue
        module = entry.get("module") if isinstance(entry, dict) else entry
        name = _resolved_verifier(str(module or "").strip(), job)
        if isinstance(name, str):
            names.append(name)
        else:
            problems.append(f"{key}[{pos}] {module!r}: {name[0]}")
    return names


def _verifier_entries(raw: dict[str, Any]) -> tuple[str, list[Any]]:
    """The task's verifier entries and the key they are under: SimLab runs `verifiers`, else `evaluators`."""
    key = "verifiers" if raw.get("verifiers") else "evaluators"
    return key, _list(raw.get(key))


def _resolved_verifier(module: str, job: _Import) -> str | tuple[str]:
    """The module's name in the scenario's `verifiers/`, or (why it has none,)."""
    stem = module.rsplit(".", 1)[-1]
    if not is_plain_name(stem) or not stem.isidentifier():
        return (f"{stem!r} cannot name a verifier module",)
    # SimLab's own lookup: the bundle's verifiers/<stem>.py, then v<stem>.py for a stem Python cannot import.
    for candidate in (stem, f"v{stem}"):
        if (job.staging / "verifiers" / f"{candidate}.py").is_file():
            return candidate
    if not module.startswith(f"{SIMLAB_VERIFIER_PACKAGE}."):
        return (f"no file verifiers/{stem}.py in the bundle",)
    if job.simlab_package is None:
        return (f"no file verifiers/{stem}.py in the bundle, and no SimLab package was given (--simlab-package)",)
    source = job.simlab_package / "verifiers" / f"{stem}.py"
    if not source.is_file():
        return (f"no file verifiers/{stem}.py in the bundle nor in the SimLab package at {job.simlab_package}",)
    shutil.copyfile(source, job.staging / "verifiers" / f"{stem}.py")
    job.report.note("bundle", f"verifiers/{stem}.py: taken from the SimLab package at {job.simlab_package}")
    return stem


def _rubric(task_id: str, name: str, markdown: str) -> dict[str, Any]:
    title = next((line[2:].strip() for line in markdown.splitlines() if line.startswith("# ")), name)
    return Rubric(task_id=task_id, title=title, overview=markdown.strip()).model_dump()
