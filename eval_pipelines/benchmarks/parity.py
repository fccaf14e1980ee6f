"""Parity: a benchmark's own grader run over a sweep's rollouts and compared, rollout by rollout, with our verdicts.

Our verdicts come from our verifier code (`verifications_latest`); the upstream grader runs only here, in the
benchmark's own environment (an `UpstreamWorker`), so parity is a real check of our port.

Each benchmark folder provides `benchmarks/<name>/parity.py` with a module attribute `PARITY_ADAPTER` that
satisfies `ParityAdapter`: it turns our stored rollouts (`ParityItem`) into the upstream format and returns the
upstream grader's `UpstreamVerdict` per rollout. Everything else (finding the rollouts, loading their artifacts,
comparing, writing the `parity_gradings` table) is generic and lives here.

Components: a verdict names its parts (BFCL: `state`, `response`, ...; τ²: `DB`, `COMMUNICATE`, ...) so that a
disagreement says which check flipped. Our verifier reports its parts as `{name: passed}` under the key
`COMPONENTS_KEY` of its output; a component only one side reports is not compared.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.schemas.artifacts import RunArtifacts, UnreadableArtifacts, read_artifacts_file
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.warehouse.benchmark_rows import (
    BenchmarkRollout,
    ParityRecord,
    benchmark_rollouts,
    parity_table,
    stored_sweep_ids,
)
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import PARITY

logger = logging.getLogger(__name__)

#: Where our verifier puts its per-component verdicts in its output: `{"components": {"DB": true, ...}}`.
COMPONENTS_KEY = "components"
#: The component name of the overall verdict in `flips`.
SUCCESS_COMPONENT = "success"
PARITY_FILE_PREFIX = "parity-"
_BENCHMARK_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_UNSAFE_IN_STEM = re.compile(r"[^A-Za-z0-9_.-]")


class ParityError(ValueError):
    """Bad input to a parity run (an unknown sweep or benchmark): the CLI's exit 2."""


@dataclass(frozen=True)
class ParityItem:
    """One stored rollout handed to an adapter: what our rollout recorded, and the task it ran."""

    rollout_id: str
    task_id: str
    artifacts: RunArtifacts
    task: Task


@dataclass(frozen=True)
class UpstreamVerdict:
    """The upstream grader's verdict on one rollout."""

    rollout_id: str
    success: bool
    reward: float
    #: component name -> passed, as the upstream grader reports them.
    components: dict[str, bool] = field(default_factory=dict)
    #: the grader's own words (its error or reason), shown beside a disagreement.
    message: str = ""


class WorkerHandle(Protocol):
    async def close(self) -> None: ...


class ParityAdapter(Protocol):
    """What a benchmark folder provides for parity (`benchmarks/<name>/parity.py`, attribute `PARITY_ADAPTER`)."""

    #: The benchmark's name as tasks carry it (`Task.benchmark`): "bfcl", "tau2".
    benchmark: str
    #: The pinned upstream package version whose grader runs (`bfcl-eval==2026.3.23` -> "2026.3.23").
    upstream_version: str
    #: Components graded by a model (an LLM judge): a flip there is reported but is not a disagreement on a
    #: deterministic component (which is what makes `eval-pipelines parity` exit 1).
    judged_components: frozenset[str]

    async def start_worker(self) -> WorkerHandle:
        """The upstream environment's worker the grading runs in (made and cached on first use)."""
        ...

    async def upstream_verdicts(self, worker: Any, items: Sequence[ParityItem]) -> list[UpstreamVerdict]:
        """The upstream grader's verdict on each item (one per item, any order)."""
        ...


def adapter_for(benchmark: str) -> ParityAdapter:
    """The parity adapter of a benchmark, from its folder's `parity.py`."""
    if not _BENCHMARK_NAME.match(benchmark):
        raise ParityError(f"--benchmark: {benchmark!r} is not a benchmark name")
    try:
        module = importlib.import_module(f"eval_pipelines.benchmarks.{benchmark}.parity")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.startswith(f"eval_pipelines.benchmarks.{benchmark}"):
            raise ParityError(
                f"benchmark {benchmark!r} has no parity adapter (benchmarks/{benchmark}/parity.py)"
            ) from None
        raise
    adapter: ParityAdapter = module.PARITY_ADAPTER
    return adapter


@dataclass(frozen=True)
class Comparison:
    agree: bool
    flips: tuple[str, ...]
    deterministic_disagreement: bool


def compare(
    ours_success: bool,
    ours_components: Mapping[str, bool],
    upstream: UpstreamVerdict,
    judged_components: frozenset[str],
) -> Comparison:
    """Which parts of the two verdicts differ. The overall verdict flipping counts as deterministic unless every
    component that flipped with it is a judged one."""
    flips = [
        name
        for name in sorted(set(ours_components) & set(upstream.components))
        if bool(ours_components[name]) != bool(upstream.components[name])
    ]
    success_flip = ours_success != upstream.success
    deterministic = any(name not in judged_components for name in flips)
    if success_flip:
        deterministic = deterministic or not flips
        flips.insert(0, SUCCESS_COMPONENT)
    return Comparison(agree=not flips, flips=tuple(flips), deterministic_disagreement=deterministic)


@dataclass
class BenchmarkParity:
    benchmark: str
    upstream_version: str
    records: list[ParityRecord] = field(default_factory=list)
    #: rollout_id -> why it was not graded (no trace, unreadable trace, unknown task).
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def agreeing(self) -> int:
        return sum(r.agree for r in self.records)

    @property
    def disagreements(self) -> list[ParityRecord]:
        return [r for r in self.records if not r.agree]

    @property
    def deterministic_disagreements(self) -> int:
        return sum(r.deterministic_disagreement for r in self.records)


@dataclass
class ParityReport:
    sweep_id: str
    benchmarks: list[BenchmarkParity]
    files: list[Path] = field(default_factory=list)

    @property
    def deterministic_disagreements(self) -> int:
        return sum(b.deterministic_disagreements for b in self.benchmarks)


def _ours_components(output_jsons: Sequence[dict[str, Any]]) -> dict[str, bool]:
    merged: dict[str, bool] = {}
    for output in output_jsons:
        parts = output.get(COMPONENTS_KEY)
        if isinstance(parts, dict):
            merged.update({str(k): bool(v) for k, v in parts.items()})
    return merged


#: (scenario_id, task_id) -> the task; KeyError when unknown.
TaskLookup = Callable[[str, str], Task]


def catalog_tasks(catalog: ScenarioCatalog) -> TaskLookup:
    """The tasks of the scenario catalog (benchmark scenarios included), by scenario id and task id."""
    return lambda scenario_id, task_id: catalog.get(scenario_id).task(task_id)


def _load_item(row: BenchmarkRollout, task_of: TaskLookup) -> ParityItem | str:
    """The item to grade, or why the rollout cannot be graded."""
    if not row.artifacts_path:
        return "no stored trace"
    try:
        task = task_of(row.scenario_id, row.task_id)
    except KeyError:
        return f"task {row.task_id!r} of scenario {row.scenario_id!r} is not in the scenario catalog"
    try:
        artifacts = RunArtifacts.from_stored_bytes(read_artifacts_file(row.artifacts_path), source=row.artifacts_path)
    except (OSError, UnreadableArtifacts, ValueError) as exc:
        return f"unreadable trace: {exc}"
    return ParityItem(rollout_id=row.rollout_id, task_id=row.task_id, artifacts=artifacts, task=task)


def grading_id(upstream_version: str, rows: Sequence[BenchmarkRollout]) -> str:
    """One grading run's identity: the upstream version and the verdicts of ours it was compared with. Grading
    the same verdicts again replaces that run's file; a re-verification or a new upstream version adds one."""
    digest = hashlib.sha256(upstream_version.encode())
    for row in sorted(rows, key=lambda r: r.rollout_id):
        digest.update(f"\0{row.rollout_id}\0{row.ours_verdict_key}".encode())
    return digest.hexdigest()[:12]


def parity_file_stem(sweep_id: str, grading: str) -> str:
    return f"{PARITY_FILE_PREFIX}{_UNSAFE_IN_STEM.sub('_', sweep_id)}-{grading}"


async def grade_benchmark(
    adapter: ParityAdapter,
    rows: Sequence[BenchmarkRollout],
    task_of: TaskLookup,
    graded_at: dt.datetime,
) -> BenchmarkParity:
    """Run the adapter's upstream grader over one benchmark's rollouts and compare each verdict with ours."""
    result = BenchmarkParity(adapter.benchmark, adapter.upstream_version)
    items: list[ParityItem] = []
    by_id = {row.rollout_id: row for row in rows}
    for row in rows:
        if not row.scored:
            # Our verdict is missing (an infrastructure error, or not verified yet): nothing to compare.
            result.skipped[row.rollout_id] = f"error: {row.error_class}" if row.outcome == "error" else "not verified"
            continue
        loaded = _load_item(row, task_of)
        if isinstance(loaded, str):
            result.skipped[row.rollout_id] = loaded
        else:
            items.append(loaded)
    if not items:
        return result
    worker = await adapter.start_worker()
    try:
        verdicts = await adapter.upstream_verdicts(worker, items)
    finally:
        await worker.close()
    graded = {v.rollout_id: v for v in verdicts}
    grading = grading_id(adapter.upstream_version, [by_id[i.rollout_id] for i in items])
    for item in items:
        row = by_id[item.rollout_id]
        upstream = graded.get(item.rollout_id)
        if upstream is None:
            result.skipped[item.rollout_id] = "the upstream grader returned no verdict"
            continue
        compared = compare(row.ours_success, _ours_components(row.ours_outputs), upstream, adapter.judged_components)
        result.records.append(
            ParityRecord(
                rollout=row,
                benchmark=adapter.benchmark,
                upstream_success=upstream.success,
                upstream_reward=float(upstream.reward),
                ours_components=_ours_components(row.ours_outputs),
                upstream_components=dict(upstream.components),
                agree=compared.agree,
                flips=list(compared.flips),
                deterministic_disagreement=compared.deterministic_disagreement,
                upstream_message=upstream.message,
                upstream_version=adapter.upstream_version,
                grading_id=grading,
                graded_at=graded_at,
            )
        )
    return result


def write_parity(warehouse: Warehouse, sweep_id: str, result: BenchmarkParity) -> list[Path]:
    """One file per model x scenario partition and grading run (idempotent: a repeat replaces its own file)."""
    files: list[Path] = []
    partitions: dict[tuple[str, str, str], list[ParityRecord]] = {}
    for record in result.records:
        key = (record.rollout.model, record.rollout.scenario, record.grading_id)
        partitions.setdefault(key, []).append(record)
    for (model_key, scenario_key, grading), records in sorted(partitions.items()):
        files.append(
            warehouse.write(
                PARITY.name,
                parity_table(records),
                model_key=model_key,
                scenario_key=scenario_key,
                file_stem=parity_file_stem(sweep_id, grading),
            )
        )
    return files


async def run_parity(
    warehouse_root: Path,
    sweep_id: str,
    *,
    task_of: TaskLookup,
    benchmark: str | None = None,
    adapters: Mapping[str, ParityAdapter] | None = None,
    graded_at: dt.datetime | None = None,
) -> ParityReport:
    """Grade every benchmark rollout of `sweep_id` (only `benchmark`'s when given) with the upstream graders,
    compare with our latest verdicts and append the rows to the warehouse's `parity_gradings` table.

    `adapters` maps a benchmark name to its adapter; a benchmark not in it is looked up with `adapter_for`."""
    warehouse = Warehouse(warehouse_root)
    rows = benchmark_rollouts(warehouse_root, sweep_id)
    if not rows:
        known = stored_sweep_ids(warehouse_root)
        if sweep_id not in known:
            raise ParityError(f"--sweep: no stored rollouts of sweep {sweep_id!r}; sweeps in the warehouse: {known}")
    by_benchmark: dict[str, list[BenchmarkRollout]] = {}
    for row in rows:
        by_benchmark.setdefault(row.benchmark, []).append(row)
    if benchmark is not None:
        if benchmark not in by_benchmark:
            raise ParityError(
                f"--benchmark: sweep {sweep_id!r} has no rollouts of benchmark {benchmark!r}; "
                f"its benchmarks: {sorted(by_benchmark)}"
            )
        by_benchmark = {benchmark: by_benchmark[benchmark]}
    graded_at = graded_at or dt.datetime.now(dt.UTC)
    report = ParityReport(sweep_id, [])
    for name, mine in sorted(by_benchmark.items()):
        adapter = (adapters or {}).get(name) or adapter_for(name)
        result = await grade_benchmark(adapter, mine, task_of, graded_at)
        if result.skipped:
            logger.warning("%s: %d rollouts were not graded upstream", name, len(result.skipped))
        report.files.extend(write_parity(warehouse, sweep_id, result))
        report.benchmarks.append(result)
    return report


#: Disagreeing rollouts listed per benchmark by `summary_lines` unless told otherwise.
DEFAULT_SHOWN_DISAGREEMENTS = 20


def summary_lines(report: ParityReport, shown: int = DEFAULT_SHOWN_DISAGREEMENTS) -> list[str]:
    """What `eval-pipelines parity` prints: per benchmark the counts, then the first `shown` disagreements."""
    lines = [f"parity of sweep {report.sweep_id}"]
    if not report.benchmarks:
        lines.append("  no benchmark rollouts in this sweep")
    for result in report.benchmarks:
        flipped = result.disagreements
        lines.append(
            f"{result.benchmark} (upstream {result.upstream_version}): {len(result.records)} rollouts graded, "
            f"{result.agreeing} agree, {len(flipped)} disagree "
            f"({result.deterministic_disagreements} on a deterministic component), "
            f"{len(result.skipped)} not graded"
        )
        for record in flipped[:shown]:
            ours = "pass" if record.rollout.ours_success else "fail"
            upstream = "pass" if record.upstream_success else "fail"
            lines.append(
                f"  {record.rollout.rollout_id} {record.rollout.scenario_id}/{record.rollout.task_id} "
                f"{record.rollout.model_name}: ours {ours}, upstream {upstream}; flips {', '.join(record.flips)}"
                + (f" ({record.upstream_message})" if record.upstream_message else "")
            )
        if len(flipped) > shown:
            lines.append(f"  ... and {len(flipped) - shown} more (the `parity` view lists them all)")
        reasons: dict[str, int] = {}
        for why in result.skipped.values():
            reasons[why.partition(":")[0]] = reasons.get(why.partition(":")[0], 0) + 1
        lines.extend(f"  not graded: {count} x {why}" for why, count in sorted(reasons.items()))
    return lines
