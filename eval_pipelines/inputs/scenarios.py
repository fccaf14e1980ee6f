"""Reads scenarios from disk.

Layout of one scenario folder (`scenarios/<folder>/` of a project, or a built-in one)::

    template.json          {scenario_id, name, description, tool_servers: [{name, server_type}]}
    npcs.json              [NpcProfile, ...]                      (optional)
    seed_data/<file>       seed files; JSON files are sent to the tool servers when a workspace is seeded
    servers/<name>.json    SimulatedServer: a tool server known by its tools' schemas, which the tool host
                           simulates (task generation writes one for each server of a user's toolset)
    tasks/<task_id>.json   Task fields; `npc_profiles` may list profile ids from npcs.json
    verifiers/__init__.py  an importable package of verifier modules, each defining verify(run_artifacts)
    verifiers/<module>.py

Every error names the file and the field, so a broken scenario is fixed in one look.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

from pydantic import ValidationError

from eval_pipelines.inputs.hosted import seed_calendar_events, seed_emails
from eval_pipelines.inputs.paths import (
    benchmarks_data_dir,
    builtin_scenarios_dir,
    reads_builtin_scenarios,
    scenarios_dir,
)
from eval_pipelines.lib.json_values import text_nests_deeper_than
from eval_pipelines.schemas.limits import MAX_JSON_DEPTH
from eval_pipelines.schemas.scenarios import (
    SIMULATED_SERVERS_DIR,
    NpcProfile,
    Rubric,
    SeedDataFile,
    SimulatedServer,
    Task,
    Template,
)
from eval_pipelines.schemas.service_wire import PublicTask

_UNSAFE_KEY_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
#: How much of a refused file name an error message shows.
_SHOWN_CHARS = 200


class ScenarioError(ValueError):
    """A scenario file is missing or malformed; the message names the file and the field."""


def partition_key(raw_id: str) -> str:
    """A Dagster-safe, path-safe key for a scenario or model id (`email_ops:1.0.0` -> `email_ops_1.0.0`).

    Dagster silently drops dynamic keys containing `|`, `,`, `[` or `]`, and `/` would nest folders in the
    Hive layout, so everything outside `[A-Za-z0-9_.-]` becomes `_`. The raw id is kept in a column.
    """
    return _UNSAFE_KEY_CHARS.sub("_", raw_id)


@contextlib.contextmanager
def staged_scenario_folder(target: Path) -> Iterator[Path]:
    """A folder to assemble a scenario in, renamed onto `target` (replacing it) only when the block succeeds and
    removed otherwise, so a catalog scan never sees a half-written scenario. It is made beside the scenarios
    directory, not in it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent.parent))
    try:
        yield staging
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def default_scenarios_dir() -> Path:
    return scenarios_dir()


def _format_validation_error(path: Path, error: ValidationError, prefix: str = "") -> str:
    parts = []
    for item in error.errors():
        loc = prefix + ".".join(str(p) for p in item["loc"]) or "<root>"
        message = item["msg"].removeprefix("Value error, ") if item["type"] == "value_error" else item["msg"]
        parts.append(f"{loc}: {message}")
    return f"{path}: " + "; ".join(parts)


def resolves_inside(path: Path, folder: Path) -> bool:
    """Whether `path`, with every symbolic link on the way followed, is `folder` or lies beneath it."""
    return InsideCheck(folder)(path)


class InsideCheck:
    """`resolves_inside` for many paths under one folder, as loading a scenario's thousands of task files asks:
    the folder and each directory are resolved once, and a path that is no link itself costs one `lstat`.
    Resolving every path whole (a `lstat` per component, twice per check) was most of a large scenario's load
    time, paid again by every process that loads it. Meant for one pass: a link made later is not seen."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._real_folder: Path | None = None
        self._real_dirs: dict[Path, Path] = {}

    def __call__(self, path: Path) -> bool:
        try:
            if self._real_folder is None:
                self._real_folder = self.folder.resolve()
            if path.name in ("", "..") or path.is_symlink():
                real = path.resolve()
            else:
                parent = self._real_dirs.get(path.parent)
                if parent is None:
                    parent = self._real_dirs[path.parent] = path.parent.resolve()
                real = parent / path.name
        except (OSError, RuntimeError):  # a link loop leads nowhere inside
            return False
        return real == self._real_folder or self._real_folder in real.parents


def read_json_file(path: Path, folder: Path, inside: InsideCheck | None = None) -> Any:
    """A JSON file of a scenario whose files all lie in `folder`. Refused before it is opened when a link leads
    out of `folder`, and before it is parsed when it nests deeper than the parser's stack allows. `inside`: the
    check to use for `folder` when many files are read in one pass."""
    if not (inside or InsideCheck(folder))(path):
        raise ScenarioError(f"{path}: is a link to a file outside {folder}; it is not read")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ScenarioError(f"{path}: file is missing") from exc
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot be read: {exc.strerror}") from exc
    if text_nests_deeper_than(text, MAX_JSON_DEPTH):
        raise ScenarioError(f"{path}: JSON nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc


def safe_relative_path(filename: str) -> PurePosixPath:
    """Validate a client-supplied relative file name; raise ValueError on traversal or absolute paths.

    Percent-encoding is undone first so `%2e%2e/` is caught like `../`.
    """
    decoded = filename
    for _ in range(3):  # double-encoded input must not slip through
        decoded = unquote(decoded)
    if not decoded or "\x00" in decoded or "\\" in decoded:
        raise ValueError("filename is empty or contains a forbidden character")
    path = PurePosixPath(decoded)
    if path.is_absolute() or any(part in ("..", "") for part in path.parts) or decoded.startswith("~"):
        raise ValueError("filename must be a relative path inside the seed data directory")
    return path


#: A materialised benchmark's upstream splits (split -> task ids), written by its adapter when upstream has any.
SPLITS_FILE = "splits.json"


@dataclass
class _LoadPass:
    """What one load of a scenario's tasks checks once however many tasks ask: the confinement of its folders
    (each resolved once) and the seed files and verifier modules that many tasks name (a generated scenario's
    tasks may all share them; a materialised benchmark's each have their own seed file)."""

    inside_root: InsideCheck
    inside_seeds: InsideCheck
    seeds_checked: set[str] = field(default_factory=set)
    verifiers_checked: set[str] = field(default_factory=set)


@dataclass
class ScenarioFiles:
    """One scenario folder, loaded lazily and cached."""

    root: Path
    template: Template
    #: materialised from an upstream benchmark (`<data>/benchmarks/`): run only when a sweep names it.
    benchmark: bool = False
    _tasks: dict[str, Task] | None = field(default=None, repr=False)
    _seed_payloads: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def scenario_id(self) -> str:
        return self.template.scenario_id

    @property
    def key(self) -> str:
        return partition_key(self.scenario_id)

    @cached_property
    def npcs(self) -> list[NpcProfile]:
        path = self.root / "npcs.json"
        if not path.exists():
            return []
        raw = read_json_file(path, self.root)
        if not isinstance(raw, list):
            raise ScenarioError(f"{path}: expected a JSON array of NPC profiles")
        profiles = []
        for index, item in enumerate(raw):
            try:
                profiles.append(NpcProfile.model_validate(item))
            except ValidationError as exc:
                raise ScenarioError(_format_validation_error(path, exc, prefix=f"[{index}].")) from exc
        return profiles

    @cached_property
    def simulated_servers(self) -> dict[str, SimulatedServer]:
        """The servers of `servers/<name>.json`, by name."""
        servers: dict[str, SimulatedServer] = {}
        for path in sorted((self.root / SIMULATED_SERVERS_DIR).glob("*.json")):
            try:
                server = SimulatedServer.model_validate(read_json_file(path, self.root))
            except ValidationError as exc:
                raise ScenarioError(_format_validation_error(path, exc)) from exc
            if server.name != path.stem:
                raise ScenarioError(f"{path}: name: {server.name!r} is not the file's name {path.stem!r}")
            servers[server.name] = server
        return servers

    def tool_server_urls(self, hosted: Mapping[str, str]) -> dict[str, str]:
        """Where each server of the scenario answers: `hosted` (a tool host's servers by the name it serves them
        under), with each simulated server under its own name. Its rollouts then provision, seed, snapshot and
        diff it like a built-in server."""
        urls = dict(hosted)
        for name, server in self.simulated_servers.items():
            if server.host_name in hosted:
                urls[name] = hosted[server.host_name]
        return urls

    def splits(self) -> dict[str, list[str]] | None:
        """The upstream splits of a materialised benchmark (`splits.json`: split -> task ids), or None."""
        path = self.root / SPLITS_FILE
        if not path.is_file():
            return None
        raw = read_json_file(path, self.root)
        if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
            raise ScenarioError(f"{path}: expected a JSON object of split name -> list of task ids")
        return {str(name): [str(t) for t in ids] for name, ids in raw.items()}

    def tasks(self) -> dict[str, Task]:
        if self._tasks is None:
            npcs_by_id = {npc.profile_id: npc for npc in self.npcs}
            tasks: dict[str, Task] = {}
            load = _LoadPass(InsideCheck(self.root), InsideCheck(self.seed_dir))
            for path in sorted((self.root / "tasks").glob("*.json")):
                raw = read_json_file(path, self.root, load.inside_root)
                if not isinstance(raw, dict):
                    raise ScenarioError(f"{path}: expected a JSON object")
                raw = dict(raw)
                profiles = []
                for ref in raw.get("npc_profiles", []):
                    if isinstance(ref, str):
                        if ref not in npcs_by_id:
                            raise ScenarioError(f"{path}: npc_profiles: unknown profile_id {ref!r}")
                        profiles.append(npcs_by_id[ref].model_dump(exclude={"public_info"}))
                    else:
                        profiles.append(ref)
                raw["npc_profiles"] = profiles
                try:
                    task = Task.model_validate(raw)
                except ValidationError as exc:
                    raise ScenarioError(_format_validation_error(path, exc)) from exc
                if task.task_id in tasks:
                    raise ScenarioError(f"{path}: task_id: {task.task_id!r} is used by another task")
                self._check_task_references(path, task, load)
                tasks[task.task_id] = task
            if not tasks:
                raise ScenarioError(f"{self.root / 'tasks'}: the scenario has no tasks")
            self._check_verifier_links()
            _ = self.simulated_servers  # a broken server file is a scenario error at load, not mid-run
            self._tasks = tasks
        return self._tasks

    def _check_task_references(self, path: Path, task: Task, load: _LoadPass) -> None:
        for server, files in task.seed_data.items():
            for index, name in enumerate(files):
                if name in load.seeds_checked:
                    continue
                where = f"{path}: seed_data.{server}[{index}]"
                try:
                    seed = self.seed_path(name, load)
                except ValueError as exc:
                    raise ScenarioError(f"{where}: {exc}") from None
                if not seed.is_file():
                    raise ScenarioError(f"{where}: seed file {name!r} does not exist")
                if seed.suffix == ".json":  # a broken seed file is a scenario error at load, not a crash mid-run
                    read_json_file(seed, self.seed_dir, load.inside_seeds)
                load.seeds_checked.add(name)
        for module in task.verifiers:
            if module in load.verifiers_checked:
                continue
            if not (self.root / "verifiers" / f"{module}.py").is_file():
                raise ScenarioError(f"{path}: verifiers: module {module!r} has no file verifiers/{module}.py")
            load.verifiers_checked.add(module)
        known_servers = {s.name for s in self.template.tool_servers}
        for ref in task.tool_servers:
            if ref.name not in known_servers:
                raise ScenarioError(
                    f"{path}: tool_servers: {ref.name!r} is not one of the template's {sorted(known_servers)}"
                )

    def task(self, task_id: str) -> Task:
        tasks = self.tasks()
        if task_id not in tasks:
            raise KeyError(task_id)
        return tasks[task_id]

    def rubric(self, task_id: str) -> Rubric | None:
        return self.task(task_id).rubric

    def _check_verifier_links(self) -> None:
        """The verifier package is imported whole, so no file or folder of it may link out of the scenario."""
        folder = self.verifiers_dir
        if not folder.is_dir():
            return
        if not resolves_inside(folder, self.root):
            raise ScenarioError(f"{folder}: is a link to a folder outside {self.root}; it is not imported")
        for parent, folders, files in os.walk(folder):  # links are not walked into: each is checked instead
            for name in (*folders, *files):
                entry = Path(parent) / name
                if entry.is_symlink() and not resolves_inside(entry, self.root):
                    raise ScenarioError(f"{entry}: is a link to a file outside {self.root}; it is not imported")

    @property
    def seed_dir(self) -> Path:
        return self.root / "seed_data"

    def seed_path(self, name: str, load: _LoadPass | None = None) -> Path:
        """Where the seed file a task names as `name` lies: inside the scenario's seed_data/, with every link on
        the way followed. ValueError, before anything is opened, for an absolute name, a `..`, or a link out.
        `load`: the checks of a load of the tasks, which resolve each folder once."""
        folder = self.seed_dir
        outside = ValueError(f"{name[:_SHOWN_CHARS]!r} is not inside {folder}")
        relative = PurePosixPath(name)
        if not name or "\x00" in name or relative.is_absolute() or ".." in relative.parts:
            raise outside
        target = folder / relative
        inside_seeds, inside_root = (load.inside_seeds, load.inside_root) if load else (None, None)
        if not ((inside_seeds or InsideCheck(folder))(target) and (inside_root or InsideCheck(self.root))(folder)):
            raise outside
        return target

    def seed_files(self) -> list[str]:
        base = self.seed_dir
        if not base.is_dir() or not resolves_inside(base, self.root):
            return []
        return sorted(
            p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file() and resolves_inside(p, base)
        )

    def seed_file(self, filename: str) -> SeedDataFile:
        """Read one seed file by its relative name. ValueError on traversal, FileNotFoundError if absent."""
        relative = safe_relative_path(filename)
        try:
            target = self.seed_path(relative.as_posix())
        except ValueError:
            raise FileNotFoundError(filename) from None
        if not target.is_file():
            raise FileNotFoundError(filename)
        return SeedDataFile(
            scenario_id=self.scenario_id, filename=relative.as_posix(), content=target.read_text(encoding="utf-8")
        )

    def seed_payload(self, task: Task, server: str) -> list[Any]:
        """The parsed JSON seed files a task sends to one tool server, in declaration order. Each file is read
        once, like the tasks (every rollout of a run sends the same ones); the objects are shared, so callers
        send them and never change them."""
        return [self._seed_file(name) for name in task.seed_data.get(server, [])]

    def _seed_file(self, name: str) -> Any:
        if name not in self._seed_payloads:
            self._seed_payloads[name] = self._read_seed(name)
        return self._seed_payloads[name]

    def _read_seed(self, name: str) -> Any:
        # Confined again here, not only at load: a task may come from elsewhere (a run's task override).
        try:
            path = self.seed_path(name)
        except ValueError as exc:
            raise ScenarioError(f"{self.root}: seed_data: {exc}") from None
        return read_json_file(path, self.seed_dir)

    def public_task(self, task: Task, tool_server_urls: Mapping[str, str] | None = None) -> PublicTask:
        """The task as the service lists it, with the hosted product's seed and verifier fields filled in, and
        the URL of each tool server that `tool_server_urls` names."""
        payloads = [
            self._read_seed(name) for names in task.seed_data.values() for name in names if name.endswith(".json")
        ]
        return PublicTask.of(
            task,
            scenario_id=self.scenario_id,
            seed_emails=seed_emails(payloads),
            seed_calendar_events=seed_calendar_events(payloads),
            tool_server_urls=tool_server_urls,
        )

    @property
    def verifiers_dir(self) -> Path:
        return self.root / "verifiers"

    def with_counts(self) -> Template:
        return self.template.model_copy(update={"num_tasks": len(self.tasks()), "num_npcs": len(self.npcs)})


def _version_order(version: str) -> tuple[tuple[int, int | str], ...]:
    """`1.10.0` after `1.9.0`: numeric parts compare as numbers, and sort before any text part."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in version.split("."))


class ScenarioCatalog:
    """All scenarios under one directory (for the project's own folder, beside the built-in scenarios), by
    scenario id. Re-scans on `refresh()` (new generated scenarios)."""

    def __init__(self, root: Path | None = None, benchmarks_root: Path | None = None) -> None:
        self.root = root or default_scenarios_dir()
        #: Folders read, in order; a later folder's scenario replaces an earlier one's of the same id (a project
        #: may copy a built-in scenario and change it). The project's own folder comes after the built-in one.
        self.roots = [builtin_scenarios_dir(), self.root] if reads_builtin_scenarios(self.root) else [self.root]
        #: The materialised benchmarks (`<data>/benchmarks/`), read last; `*` in a sweep leaves them out.
        self.benchmarks_root = benchmarks_root or benchmarks_data_dir()
        self._by_id: dict[str, ScenarioFiles] = {}
        self.refresh()

    def refresh(self) -> None:
        by_id: dict[str, ScenarioFiles] = {}
        for root in self.roots:
            by_id.update(self._scan(root))
        by_id.update(self._scan(self.benchmarks_root, benchmark=True))
        self._by_id = by_id

    @classmethod
    def scan_benchmarks(cls, root: Path | None = None) -> list[ScenarioFiles]:
        """The materialised benchmarks alone (`<data>/benchmarks/` unless `root` says otherwise)."""
        return list(cls._scan(root or benchmarks_data_dir(), benchmark=True).values())

    @staticmethod
    def _scan(root: Path, benchmark: bool = False) -> dict[str, ScenarioFiles]:
        by_id: dict[str, ScenarioFiles] = {}
        if not root.is_dir():
            return by_id
        for template_path in sorted(root.glob("*/template.json")):
            if template_path.parent.name.startswith("."):  # a benchmark being materialised, not yet in place
                continue
            raw = read_json_file(template_path, template_path.parent)
            try:
                template = Template.model_validate(raw)
            except ValidationError as exc:
                raise ScenarioError(_format_validation_error(template_path, exc)) from exc
            if template.scenario_id in by_id:
                raise ScenarioError(
                    f"{template_path}: scenario_id: {template.scenario_id!r} is used by "
                    f"{by_id[template.scenario_id].root}"
                )
            by_id[template.scenario_id] = ScenarioFiles(
                root=template_path.parent, template=template, benchmark=benchmark
            )
        return by_id

    def ids(self) -> list[str]:
        """By family, newest version first: SimLab takes the first listed version of a family."""
        newest_first = sorted(self._by_id, key=lambda i: _version_order(i.partition(":")[2]), reverse=True)
        return sorted(newest_first, key=lambda i: i.partition(":")[0])  # stable: versions stay newest first

    def get(self, scenario_id: str) -> ScenarioFiles:
        """Look up by raw id (`email_ops:1.0.0`), by partition key (`email_ops_1.0.0`), or by family id
        (`email_ops`: its newest version, as the hosted product and its SimLab CLI resolve it)."""
        if scenario_id in self._by_id:
            return self._by_id[scenario_id]
        for files in self._by_id.values():
            if files.key == scenario_id:
                return files
        family = [files for raw, files in self._by_id.items() if raw.partition(":")[0] == scenario_id]
        if family:
            return max(family, key=lambda files: _version_order(files.scenario_id.partition(":")[2]))
        raise KeyError(scenario_id)

    def all(self) -> list[ScenarioFiles]:
        return [self._by_id[i] for i in self.ids()]
