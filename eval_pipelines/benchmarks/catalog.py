"""The benchmark registry: scenario family id -> adapter, and materialisation of a family as a scenario folder.

An adapter (one per upstream package: `benchmarks/bfcl/adapter.py`, `benchmarks/tau2/adapter.py`) is a module-level
object named `ADAPTER` satisfying `BenchmarkAdapter`; `ADAPTER_MODULES` lists where they live (a module that is
not there yet is skipped). What an adapter provides:

- `name`: the benchmark ("bfcl", "tau2"): `Task.benchmark`, the metric's and parity's key;
- `families`: the scenario ids it materialises (`bfcl_multi_turn_base`, `tau2_airline`, ...); `refused`: ids it
  names but refuses, with the reason ("not supported yet: needs user-side tools");
- `version`: the pinned upstream version, the benchmark's identity: the scenario version is `<family>:<version>`;
- `environment`: an `environments.EnvironmentSpec` (the pinned pip install steps and the worker's settings);
- `worker_script`: the upstream script its workers run (protocol: `worker.py`; the tool ops: `toolserver.py`);
- `tool_servers`: server name -> `UpstreamToolServer` subclass, every server its families' tasks name;
- `default_max_steps_per_turn`: what its tasks' `max_steps_per_turn` is (BFCL: 20; None: no cap);
- `metric`: the warehouse view of the authors' metric (`bfcl_accuracy`, `tau2_pass_hat_k`);
- `async materialise(worker, family, out_dir)`: write the family's scenario folder into `out_dir` (an empty
  temporary folder, moved into place once complete): `template.json`, `tasks/<task_id>.json` (plain task ids),
  `verifiers/` (the adapter's verifier template and `gold.json`), and `splits.json` (`{split: [task_id, ...]}`)
  when upstream has splits. The worker runs the adapter's `worker_script` in the benchmark's venv.

`materialise(family, data_dir)` makes `<data>/benchmarks/<family>/` once per pinned version (a marker file names
it); `ensure_materialised(scenario_ids, data_dir)` does it for the benchmark ids among a sweep's scenarios, before
the sweep resolves them.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import importlib
import json
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from eval_pipelines.benchmarks.environments import EnvironmentSpec, ensure
from eval_pipelines.benchmarks.toolserver import UpstreamToolServer
from eval_pipelines.benchmarks.worker import UpstreamWorker
from eval_pipelines.inputs.paths import benchmarks_data_dir
from eval_pipelines.inputs.sweeps import ConfigError

#: Where the adapters live; each module defines `ADAPTER`.
ADAPTER_MODULES = ("eval_pipelines.benchmarks.bfcl.adapter", "eval_pipelines.benchmarks.tau2.adapter")
#: Written last into a materialised family: the adapter's name, pinned version and code digest it was made from.
MATERIALISED_MARKER = ".materialised.json"
#: A materialised family's upstream splits, when upstream has any (`{split: [task_id, ...]}`).
SPLITS_FILE = "splits.json"


class BenchmarkAdapter(Protocol):
    """What `catalog` needs of a benchmark (see the module docstring for each member)."""

    name: str
    families: tuple[str, ...]
    refused: dict[str, str]
    version: str
    environment: EnvironmentSpec
    worker_script: Path
    tool_servers: dict[str, type[UpstreamToolServer]]
    default_max_steps_per_turn: int | None
    metric: str

    async def materialise(self, worker: UpstreamWorker, family: str, out_dir: Path) -> None: ...


_extra: dict[str, BenchmarkAdapter] = {}


def register(adapter: BenchmarkAdapter) -> None:
    """Add an adapter beyond `ADAPTER_MODULES` (a test's fake benchmark); it replaces one of the same name."""
    _extra[adapter.name] = adapter


def unregister(name: str) -> None:
    _extra.pop(name, None)


def adapters() -> dict[str, BenchmarkAdapter]:
    """Every adapter by benchmark name."""
    found: dict[str, BenchmarkAdapter] = {}
    for module_name in ADAPTER_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                continue  # that adapter is not part of this build
            raise
        adapter: BenchmarkAdapter = module.ADAPTER
        found[adapter.name] = adapter
    return {**found, **_extra}


def adapter_of(family: str) -> BenchmarkAdapter | None:
    """The adapter that materialises (or refuses) `family`, or None for an ordinary scenario id."""
    for adapter in adapters().values():
        if family in adapter.families or family in adapter.refused:
            return adapter
    return None


def benchmark_families() -> list[str]:
    return [family for adapter in adapters().values() for family in adapter.families]


def server_classes() -> dict[str, type[UpstreamToolServer]]:
    """Every benchmark tool server by name, for the tool host to serve beside the built-in ones."""
    return {name: cls for adapter in adapters().values() for name, cls in adapter.tool_servers.items()}


def _checked_adapter(family: str) -> BenchmarkAdapter:
    adapter = adapter_of(family)
    if adapter is None:
        raise ConfigError(f"unknown benchmark {family!r}; known: {sorted(benchmark_families())}")
    if family in adapter.refused:
        raise ConfigError(f"benchmark {family!r} is {adapter.refused[family]}")
    return adapter


def is_materialised(family: str, data_dir: Path | None = None) -> bool:
    adapter = _checked_adapter(family)
    marker = benchmarks_data_dir(data_dir) / family / MATERIALISED_MARKER
    try:
        made = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(made, dict)
        and made.get("version") == adapter.version
        and made.get("benchmark") == adapter.name
        and made.get("adapter_digest") == adapter_digest(adapter)
    )


def adapter_digest(adapter: BenchmarkAdapter) -> str:
    """A digest of the adapter's own code (its folder's modules: scenario writer, upstream worker, verifier), so
    a family made by an older adapter (an earlier gold or task format) is made again, not read stale."""
    digest = hashlib.sha256()
    for path in sorted(adapter.worker_script.parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def materialise(family: str, data_dir: Path | None = None) -> Path:
    """`<data>/benchmarks/<family>/`, made from the pinned upstream package unless already made from it. The
    folder is written aside and moved into place whole, so a reader never sees half a family. Raises ConfigError
    for an unknown or refused family and when the environment cannot be installed."""
    adapter = _checked_adapter(family)
    target = benchmarks_data_dir(data_dir) / family
    if is_materialised(family, data_dir):
        return target
    python = ensure(adapter.environment)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{family}.lock", "w") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # a CLI sweep and the Dagster sensor may both get here
        if is_materialised(family, data_dir):
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{family}-", dir=target.parent))
        try:
            asyncio.run(_materialise(adapter, python, family, staging))
            made = json.loads((staging / "template.json").read_text(encoding="utf-8")).get("scenario_id")
            if made != f"{family}:{adapter.version}":
                raise RuntimeError(
                    f"adapter {adapter.name!r} wrote scenario_id {made!r} for {family}:{adapter.version}"
                )
            marker = {
                "benchmark": adapter.name,
                "family": family,
                "version": adapter.version,
                "adapter_digest": adapter_digest(adapter),
            }
            (staging / MATERIALISED_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


async def _materialise(adapter: BenchmarkAdapter, python: Path, family: str, out_dir: Path) -> None:
    worker = UpstreamWorker(python, adapter.worker_script, adapter.environment.worker_env)
    try:
        await adapter.materialise(worker, family, out_dir)
    finally:
        await worker.close()


def ensure_materialised(scenario_ids: Iterable[str], data_dir: Path | None = None) -> list[str]:
    """Materialise the benchmark families among `scenario_ids` (others are ignored); their ids, in order."""
    families = [sid for sid in dict.fromkeys(scenario_ids) if adapter_of(sid) is not None]
    for family in families:
        materialise(family, data_dir)
    return families


def read_splits(scenario_dir: Path) -> dict[str, list[str]] | None:
    """A materialised family's upstream splits, or None when upstream has none."""
    try:
        raw = json.loads((scenario_dir / SPLITS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{scenario_dir / SPLITS_FILE}: expected a JSON object of split -> task ids")
    return {str(k): [str(t) for t in v] for k, v in raw.items() if isinstance(v, list)}
