"""Sweep configs on disk (`sweeps/*.yaml` of a project, else the built-in ones) and the model configurations
they describe.

Every user error names the file and the field, and is raised as `ConfigError` so the CLI can print it and
exit 2 without a traceback.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from eval_pipelines.inputs.paths import sweeps_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles, partition_key
from eval_pipelines.lib.suggest import did_you_mean
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.scenarios import SimulatedUserSpec
from eval_pipelines.schemas.sweep import (
    CRON_MACROS_MORE_THAN_DAILY,
    SIMULATED_BASE_URL,
    SIMULATED_USER_MODEL,
    SweepConfig,
    SweepModel,
    is_simulated_model,
)

#: In a sweep's `scenarios`, this stands for every scenario in the catalog (generated ones included).
ALL_SCENARIOS = "*"
#: Simulated models need no credential; this placeholder is what their requests carry.
SIMULATED_API_KEY = "simulated-no-key"


class ConfigError(ValueError):
    """A user-facing configuration error (file and field named)."""


def default_sweeps_dir() -> Path:
    return sweeps_dir()


def load_sweep(path: Path) -> SweepConfig:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: sweep config file not found") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: invalid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        return SweepConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{path}: {problems}") from None


def load_all_sweeps(directory: Path | None = None) -> dict[str, SweepConfig]:
    directory = directory or default_sweeps_dir()
    sweeps: dict[str, SweepConfig] = {}
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        sweep = load_sweep(path)
        if sweep.name in sweeps:
            raise ConfigError(f"{path}: name: sweep {sweep.name!r} is defined twice")
        sweeps[sweep.name] = sweep
    return sweeps


def model_config_for(model: SweepModel, source: str = "sweep config") -> ModelConfig:
    """The ModelConfig of a sweep model, with its key read from the environment at call time (empty for a keyless
    endpoint). A named variable that is unset is a ConfigError naming the file and the field."""
    if model.is_simulated:
        key = SIMULATED_API_KEY
    elif model.api_key_env is None:  # a keyless `provider: custom` endpoint (SweepModel allows none other)
        key = ""  # the chat client sends no Authorization header without a key
    else:
        key = os.environ.get(model.api_key_env, "")
        if not key:
            raise ConfigError(
                f"{source}: models[{model.name}].api_key_env: environment variable {model.api_key_env} is not set"
            )
    return ModelConfig(
        model=model.model,
        provider=model.provider,
        api_key=key,
        base_url=model.base_url,
        temperature=model.temperature,
        max_steps=model.max_steps,
        system_prompt=model.system_prompt,
        summarize_every_n_turns=model.summarize_every_n_turns,
        context_stride=model.context_stride,
        log_prob=model.log_prob,
        request_timeout_seconds=model.request_timeout_seconds,
        max_tool_calls_per_reply=model.max_tool_calls_per_reply,
    )


def default_sweep_id(sweep: SweepConfig, day: dt.date | None = None) -> str:
    """One sweep id per sweep per UTC day: a re-run the same day resumes the same runs."""
    day = day or dt.datetime.now(dt.UTC).date()
    return f"{sweep.name}-{day:%Y%m%d}"


def fires_more_than_daily(cron: str) -> bool:
    """Whether a cron expression can fire more than once a day: a macro that does, or a minute or hour field that
    is not one number."""
    if cron in CRON_MACROS_MORE_THAN_DAILY:
        return CRON_MACROS_MORE_THAN_DAILY[cron]
    minute, hour, *_ = cron.split()
    return not (minute.isdigit() and hour.isdigit())


def scheduled_sweep_id(sweep: SweepConfig, when: dt.datetime) -> str:
    """The sweep id of a schedule's tick at `when`: the day's id for a cron that fires at most daily (a re-run that
    day resumes it), and one per tick (`<name>-<YYYYmmdd>T<HHMM>`) for a cron that fires more often, so that each
    tick is a sweep of its own rather than a resume of the day's first."""
    if sweep.cron is not None and fires_more_than_daily(sweep.cron):
        return f"{sweep.name}-{when.astimezone(dt.UTC):%Y%m%dT%H%M}"
    return default_sweep_id(sweep, when.astimezone(dt.UTC).date())


def run_name(sweep_id: str, scenario_id: str, model_name: str) -> str:
    return f"{sweep_id}.{partition_key(scenario_id)}.{model_name}"


def unknown_scenario_hint(value: str, catalog: ScenarioCatalog) -> str:
    """The "did you mean" clause for a scenario id the catalog does not know: the closest ids and families (a
    family alone names its newest version)."""
    ids = catalog.ids()
    return did_you_mean(value, [*ids, *{i.partition(":")[0] for i in ids}])


def includes_scenario(sweep: SweepConfig, scenario_key: str) -> bool:
    """Whether the sweep runs the scenario of partition key `scenario_key`; `*` covers every one but a benchmark."""
    ids = sweep.scenario_ids
    if any(partition_key(s) == scenario_key for s in ids):
        return True
    if ALL_SCENARIOS not in ids:
        return False
    return scenario_key not in {partition_key(s.scenario_id) for s in ScenarioCatalog.scan_benchmarks()}


def sweep_scenarios(
    sweep: SweepConfig,
    catalog: ScenarioCatalog,
    source: str = "sweep config",
    prepare: Callable[[list[str]], object] | None = None,
    *,
    runnable_only: bool = True,
) -> list[ScenarioFiles]:
    """The scenarios a sweep runs, in its order: the listed ids, with `*` expanding to the whole catalog but the
    materialised benchmarks (they run only when named). `prepare` gets the named ids first (the CLI and Dagster
    pass `benchmarks.catalog.ensure_materialised`, which makes the benchmark scenarios among them). A scenario
    of whose chosen tasks none can run here is not run at all (`runnable_only=False` keeps it, to say so)."""
    named = [s for s in sweep.scenario_ids if s != ALL_SCENARIOS]
    if prepare is not None and named:
        prepare(named)
        catalog.refresh()
    chosen: dict[str, ScenarioFiles] = {}
    for index, scenario_id in enumerate(sweep.scenario_ids):
        if scenario_id == ALL_SCENARIOS:
            chosen.update((s.scenario_id, s) for s in catalog.all() if not s.benchmark)
            continue
        try:
            files = catalog.get(scenario_id)
        except KeyError:
            raise ConfigError(
                f"{source}: scenarios[{index}]: unknown scenario {scenario_id!r}; known: {catalog.ids()}"
                f"{unknown_scenario_hint(scenario_id, catalog)}"
            ) from None
        chosen[files.scenario_id] = files
    if not runnable_only:
        return list(chosen.values())
    return [s for s in chosen.values() if selected_task_ids(sweep, s, source) or not unrunnable_tasks(sweep, s, source)]


def selected_task_ids(sweep: SweepConfig, scenario: ScenarioFiles, source: str = "sweep config") -> list[str]:
    """The tasks of `scenario` a sweep runs: its entry's `tasks`, else its `split`'s, else the sweep's `task_ids`
    (those in this scenario), else all of them; never a task that cannot run here (`unrunnable_tasks` names
    those); then at most the entry's `limit`. ConfigError names the field."""
    tasks = scenario.tasks()
    chosen, limit = _chosen_task_ids(sweep, scenario, source)
    runnable = [t for t in chosen if tasks[t].unrunnable_reason is None]
    return runnable[:limit] if limit is not None else runnable


def unrunnable_tasks(sweep: SweepConfig, scenario: ScenarioFiles, source: str = "sweep config") -> dict[str, str]:
    """The tasks a sweep would choose in `scenario` but leaves out because they cannot run here, with why."""
    tasks = scenario.tasks()
    chosen, _ = _chosen_task_ids(sweep, scenario, source)
    return {t: reason for t in chosen if (reason := tasks[t].unrunnable_reason) is not None}


def server_overrides(sweep: SweepConfig, scenario: ScenarioFiles, task_ids: list[str]) -> dict[str, Any]:
    """`task_overrides` of a run that give its tasks the sweep's server URLs (`servers`) in place of the ones the
    tasks record: for each task that reaches one of those servers by URL, the task as it runs in this sweep."""
    if not sweep.servers:
        return {}
    tasks = scenario.tasks()
    overrides: dict[str, Any] = {}
    for task_id in task_ids:
        task = tasks[task_id]
        http = {name: sweep.servers.get(name, url) for name, url in task.http_servers.items()}
        mcp = [
            {**spec, "url": sweep.servers[spec["name"]]}
            if spec.get("url") and spec.get("name") in sweep.servers
            else spec
            for spec in task.mcp_servers
        ]
        if http != task.http_servers or mcp != task.mcp_servers:
            changed = task.model_copy(update={"http_servers": http, "mcp_servers": mcp})
            overrides[task_id] = {"task_json": changed.model_dump(mode="json")}
    return overrides


def sweep_notices(sweep: SweepConfig, scenarios: list[ScenarioFiles], source: str = "sweep config") -> list[str]:
    """What a sweep says before it runs about tasks that give no result: those that cannot run here (left out,
    never counted as failures) and imported tasks the sweep's simulated models cannot act on."""
    lines: list[str] = []
    simulated = [m.name for m in sweep.models if is_simulated_model(m.model) and not m.agent]
    for scenario in scenarios:
        left_out = unrunnable_tasks(sweep, scenario, source)
        if left_out:
            lines.append(
                f"{scenario.scenario_id}: {len(left_out)} task(s) left out, they cannot run here (not counted "
                "as failures; see `eval-pipelines import`):"
            )
            lines.extend(f"  {task_id}: {reason}" for task_id, reason in left_out.items())
        tasks = scenario.tasks()
        blind = [
            t
            for t in selected_task_ids(sweep, scenario, source)
            if tasks[t].simlab_origin and not tasks[t].reference_actions
        ]
        if simulated and blind:
            lines.append(
                f"{scenario.scenario_id}: the simulated models ({', '.join(simulated)}) give no signal on its "
                f"{len(blind)} imported task(s): they act only on a task's reference_actions, which the bundle "
                "does not carry, so their results there measure nothing"
            )
    return lines


def _chosen_task_ids(sweep: SweepConfig, scenario: ScenarioFiles, source: str) -> tuple[list[str], int | None]:
    """The tasks the sweep's entry (or the sweep) chooses, runnable or not, and the entry's `limit`."""
    tasks = scenario.tasks()
    family = scenario.scenario_id.partition(":")[0]
    entry = sweep.scenario_entry(scenario.scenario_id, (family, scenario.key))
    where = f"{source}: scenarios[{entry.id}]" if entry is not None else source
    if entry is not None and entry.tasks is not None:
        unknown = [t for t in entry.tasks if t not in tasks]
        if unknown:
            raise ConfigError(f"{where}.tasks: unknown task(s) {unknown[:5]} in {scenario.scenario_id}")
        chosen = list(dict.fromkeys(entry.tasks))
    elif entry is not None and entry.split is not None:
        splits = scenario.splits()
        if splits is None:
            raise ConfigError(f"{where}.split: {scenario.scenario_id} has no upstream splits")
        if entry.split not in splits:
            raise ConfigError(f"{where}.split: unknown split {entry.split!r}; known: {sorted(splits)}")
        chosen = sorted((t for t in splits[entry.split] if t in tasks), key=natural_order)
    elif entry is not None and entry.limit is not None:
        chosen = sorted(tasks, key=natural_order)
    else:
        return [t for t in (sweep.task_ids or list(tasks)) if t in tasks], None
    return chosen, entry.limit


#: Who plays a simulated user when a sweep of simulated models names nobody.
DEFAULT_SIMULATED_USER = SweepModel(name=SIMULATED_USER_MODEL, model=SIMULATED_USER_MODEL, base_url=SIMULATED_BASE_URL)


def user_model_for(
    sweep: SweepConfig, model: SweepModel, scenario: ScenarioFiles, task_ids: list[str], source: str = "sweep config"
) -> SweepModel | None:
    """The model that plays the users and NPCs of `model`'s rollouts: its own `user_model`, else the sweep's. A
    task whose user is simulated (τ²-bench) needs one: `sim-user` when every model of the sweep is simulated,
    else ConfigError naming the field, since a real model's number must not rest on an offline stand-in."""
    if model.user_model:
        named = next((m for m in sweep.models if m.name == model.user_model), None)
        if named is None:
            raise ConfigError(f"{source}: models[{model.name}].user_model: no model named {model.user_model!r}")
        return named
    if sweep.user_model is not None:
        return sweep.user_model
    tasks = scenario.tasks()
    if not any(isinstance(tasks[t].user, SimulatedUserSpec) for t in task_ids if t in tasks):
        return None
    if all(m.is_simulated for m in sweep.models):
        return DEFAULT_SIMULATED_USER
    raise ConfigError(
        f"{source}: user_model: the tasks of {scenario.scenario_id} talk with a simulated user; name the model that "
        f"plays it (user_model: {{name, model, base_url, ...}}, or `{SIMULATED_USER_MODEL}` on base_url "
        f"{SIMULATED_BASE_URL} for the offline stand-in)"
    )


def natural_order(name: str) -> list[tuple[int, int | str]]:
    """`task_2` before `task_10`: upstream numbering, so a `limit` takes the first tasks as upstream counts them."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part]


def find_sweep_for(sweeps: dict[str, SweepConfig], model_key: str, scenario_key: str) -> SweepConfig:
    """The first sweep (by name) that includes both the model and the scenario of a partition."""
    for name in sorted(sweeps):
        sweep = sweeps[name]
        if any(m.name == model_key for m in sweep.models) and includes_scenario(sweep, scenario_key):
            return sweep
    raise ConfigError(f"no sweep config includes both model {model_key!r} and scenario {scenario_key!r}")
