"""Verifiers in a worker process: a raising, hanging, exiting or crashing verifier costs one failed outcome, and
the next verifier of the same batch still runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.verifiers import VerifierOutcome
from eval_pipelines.verifiers.bundle import build_bundle, load_bundle
from eval_pipelines.verifiers.isolation import (
    IsolatedVerifierRunner,
    VerifierPool,
    VerifyJob,
    WorkerStartError,
    run_in_process,
    run_jobs,
)
from eval_pipelines.verifiers.loader import load_verifier_package, verifier_version
from tests.verifiers.conftest import NOOP, PERTURBED, REFERENCE, PackageFactory, Replays

TIMEOUT = 1.5

HOSTILE = {
    "ok": "def verify(run_artifacts):\n    return True, 'fine: ' + run_artifacts.task_id\n",
    "raises": "def verify(run_artifacts):\n    raise RuntimeError('boom')\n",
    "hangs": "import time\n\ndef verify(run_artifacts):\n    time.sleep(120)\n    return True\n",
    "exits": "import sys\n\ndef verify(run_artifacts):\n    sys.exit(3)\n",
    "dies": "import os\n\ndef verify(run_artifacts):\n    os._exit(7)\n",
    "segfaults": "import os, signal\n\ndef verify(run_artifacts):\n    os.kill(os.getpid(), signal.SIGSEGV)\n",
    "no_verify": "VALUE = 1\n",
    "odd_output": (
        "class Result:\n    success = True\n    message = 'odd'\n    output = staticmethod(lambda: None)\n\n"
        "def verify(run_artifacts):\n    return Result()\n"
    ),
}
BATCH = ("ok", "raises", "ok", "hangs", "ok", "exits", "ok", "dies", "ok", "segfaults", "ok", "no_verify", "odd_output")
EXPECTED = {
    "raises": "Verifier error: RuntimeError: boom",
    "hangs": f"Verifier timed out after {TIMEOUT:g}s",
    "exits": "Verifier error: called sys.exit(3)",
    "dies": "Verifier process exited with code 7",
    "segfaults": "Verifier process exited with code -11 (killed by SIGSEGV)",
    "no_verify": "Verifier error: module 'no_verify' defines no verify()",
}


def _artifacts(task_id: str) -> RunArtifacts:
    return RunArtifacts(task_id=task_id, task="anything")


def test_hostile_verifiers_cost_one_failed_outcome_each(make_package: PackageFactory) -> None:
    folder = make_package(HOSTILE)
    jobs = [VerifyJob(_artifacts("r1"), BATCH), VerifyJob(_artifacts("r2"), ("ok",))]
    bundle = load_bundle(build_bundle("hostile:1.0.0", folder))
    with bundle, IsolatedVerifierRunner.for_bundle(bundle, timeout_seconds=TIMEOUT) as runner:
        first, second = runner.run(jobs)
        assert runner.restarts == 3  # the hang, os._exit and the segfault; sys.exit is caught in the worker
        # The replacement worker keeps serving later batches.
        assert [o.success for o in runner.run([VerifyJob(_artifacts("r3"), ("ok",))])[0]] == [True]

    assert [o.module for o in first] == list(BATCH)
    by_position = dict(enumerate(first))
    for position, module in enumerate(BATCH):
        outcome = by_position[position]
        assert outcome.verifier_version == verifier_version(folder, module)
        if module == "ok":
            assert (outcome.success, outcome.message) == (True, "fine: r1"), position
        elif module == "odd_output":
            assert outcome.success and outcome.message.startswith("odd (output not transferable")
            assert outcome.output.startswith("<function")
        else:
            assert not outcome.success and outcome.reward == 0.0
            assert outcome.message == EXPECTED[module]
    assert [(o.success, o.message) for o in second] == [(True, "fine: r2")]


def test_a_verifier_that_keeps_crashing_is_skipped_after_max_failures(make_package: PackageFactory) -> None:
    folder = make_package(HOSTILE)
    jobs = [VerifyJob(_artifacts(f"r{i}"), ("dies", "ok")) for i in range(6)]
    with IsolatedVerifierRunner(folder, timeout_seconds=TIMEOUT, max_worker_failures=2) as runner:
        results = runner.run(jobs)
        assert runner.restarts == 2
    messages = [row[0].message for row in results]
    assert messages[:2] == ["Verifier process exited with code 7"] * 2
    assert all(m.startswith("Verifier skipped: it stopped the verifier process 2 times") for m in messages[2:])
    assert all(row[1].success for row in results)


def test_isolated_and_in_process_results_agree(email_ops: ScenarioFiles, replays: Replays, tmp_path: Path) -> None:
    jobs: list[VerifyJob] = []
    for task in email_ops.tasks().values():
        for variant in (REFERENCE, NOOP, PERTURBED):
            trace = tmp_path / f"{task.task_id}-{variant}.json"
            replays[(task.task_id, variant)].dump(trace)
            jobs.append(VerifyJob(trace, tuple(task.verifiers)))  # traces are read by the worker
    jobs.append(VerifyJob(tmp_path / "missing.json", ("inbox_cleanup",)))

    isolated = run_jobs(jobs, email_ops.verifiers_dir, isolated=True, timeout_seconds=30)
    in_process = run_in_process(load_verifier_package(email_ops.verifiers_dir), jobs)

    assert [[o.model_dump() for o in row] for row in isolated] == [[o.model_dump() for o in row] for row in in_process]
    passed = [all(o.success for o in row) for row in isolated[:-1]]
    assert passed == [True, False, False] * len(email_ops.tasks())
    (missing,) = isolated[-1]
    assert not missing.success and "artifacts could not be read" in missing.message


def test_artifacts_given_as_dicts_and_models(make_package: PackageFactory) -> None:
    folder = make_package({"ok": HOSTILE["ok"]})
    jobs = [
        VerifyJob(_artifacts("model"), ("ok",)),
        VerifyJob(json.loads(_artifacts("dict").model_dump_json()), ("ok",)),
    ]
    with IsolatedVerifierRunner(folder, timeout_seconds=30) as runner:
        assert [row[0].message for row in runner.run(jobs)] == ["fine: model", "fine: dict"]
        assert runner.run([]) == [] and runner.run([VerifyJob(_artifacts("none"), ())]) == [[]]


def test_a_package_that_cannot_load_is_a_clear_start_error(make_package: PackageFactory) -> None:
    folder = make_package({})
    (folder / "__init__.py").write_text("raise ImportError('broken package init')\n")
    with (
        IsolatedVerifierRunner(folder, timeout_seconds=30) as runner,
        pytest.raises(WorkerStartError, match="broken package init"),
    ):
        runner.run([VerifyJob(_artifacts("r"), ("ok",))])


def test_the_worker_does_not_inherit_secrets(make_package: PackageFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-canary-0123456789abcdef")
    folder = make_package(
        {
            "peek": (
                "import os\n\ndef verify(run_artifacts):\n    return True, os.environ.get('OPENAI_API_KEY', 'absent')\n"
            )
        }
    )
    with IsolatedVerifierRunner(folder, timeout_seconds=30) as runner:
        (outcome,) = runner.run([VerifyJob(_artifacts("r"), ("peek",))])[0]
    assert outcome.message == "absent"


def test_a_pool_warmed_at_run_start_verifies_with_the_worker_it_started(make_package: PackageFactory) -> None:
    folder = make_package({"ok": HOSTILE["ok"]})
    pool = VerifierPool(timeout_seconds=30)
    try:
        pool.warm(folder)
        runner = pool._packages[(folder, pool.timeout_seconds)].runner
        assert runner._worker is not None and runner._worker.process.poll() is None
        started = runner._worker.process.pid
        assert [o.message for o in pool.verify_now(folder, ["ok"], _artifacts("r"))] == ["fine: r"]
        assert runner._worker.process.pid == started and runner.restarts == 0
    finally:
        pool.close()


def test_warming_a_package_that_cannot_load_leaves_the_error_to_the_first_verdict(
    make_package: PackageFactory,
) -> None:
    folder = make_package({})
    (folder / "__init__.py").write_text("raise ImportError('broken package init')\n")
    pool = VerifierPool(timeout_seconds=30)
    try:
        pool.warm(folder)  # no exception: the run goes on
        [outcome] = pool.verify_now(folder, ["ok"], _artifacts("r"))
        assert outcome.is_error and not outcome.success and "broken package init" in outcome.message
    finally:
        pool.close()


#: Holds the worker for a while on the rollout named `slow`, so the verifications behind it pile up.
GATED = {
    "gated": (
        "import time\n\ndef verify(run_artifacts):\n"
        "    if run_artifacts.task_id == 'slow':\n        time.sleep(1.0)\n"
        "    return True, 'seen: ' + run_artifacts.task_id\n"
    ),
    "dies_on_odd": (
        "import os\n\ndef verify(run_artifacts):\n"
        "    if int(run_artifacts.task_id.rsplit('-', 1)[1]) % 2:\n        os._exit(7)\n"
        "    return True, 'even'\n"
    ),
}


def _counting_batches(pool: VerifierPool, folder: Path) -> list[int]:
    """The size of every batch the pool's runner for `folder` is sent, in order."""
    runner = pool._packages[(folder, pool.timeout_seconds)].runner
    sizes: list[int] = []
    run = runner.run

    def counted(jobs: Sequence[VerifyJob]) -> list[list[VerifierOutcome]]:
        sizes.append(len(jobs))
        return run(jobs)

    runner.run = counted  # type: ignore[method-assign]
    return sizes


@dataclass
class BusyPool:
    pool: VerifierPool
    folder: Path
    #: The size of every batch sent to the package's worker; the first is the slow rollout's alone.
    sizes: list[int]
    slow: asyncio.Future[list[VerifierOutcome]]


@contextlib.asynccontextmanager
async def _busy_pool(make_package: PackageFactory) -> AsyncIterator[BusyPool]:
    """A warm pool whose worker is busy with the rollout named `slow` for a second: what is verified meanwhile
    waits for it."""
    folder = make_package(GATED)
    pool = VerifierPool(timeout_seconds=30)
    try:
        pool.warm(folder)
        sizes = _counting_batches(pool, folder)
        slow = asyncio.ensure_future(pool.verify(folder, ["gated"], _artifacts("slow")))
        while not sizes:  # the slow one holds the worker before anything else arrives
            await asyncio.sleep(0.01)
        yield BusyPool(pool, folder, sizes, slow)
    finally:
        pool.close()


async def test_verifications_that_arrive_while_the_worker_is_busy_go_to_it_as_one_batch(
    make_package: PackageFactory,
) -> None:
    async with _busy_pool(make_package) as busy:
        verify = busy.pool.verify
        rest = await asyncio.gather(*(verify(busy.folder, ["gated"], _artifacts(f"r-{i}")) for i in range(12)))
        assert [o.message for o in await busy.slow] == ["seen: slow"]
        # Each rollout gets its own verdict, in its own order, from one round trip for all twelve.
        assert [[o.message for o in outcomes] for outcomes in rest] == [[f"seen: r-{i}"] for i in range(12)]
        assert busy.sizes == [1, 12]


async def test_a_crash_in_a_batch_costs_only_that_rollouts_verdict_however_often_it_happens(
    make_package: PackageFactory,
) -> None:
    async with _busy_pool(make_package) as busy:
        verify = busy.pool.verify
        verdicts = await asyncio.gather(*(verify(busy.folder, ["dies_on_odd"], _artifacts(f"r-{i}")) for i in range(8)))
        await busy.slow
        assert busy.sizes == [1, 8]  # four crashes in one batch, and no verdict skipped for them
        for i, [outcome] in enumerate(verdicts):
            if i % 2:
                assert outcome.is_error and outcome.message == "Verifier process exited with code 7"
            else:
                assert outcome.success and outcome.message == "even"


async def test_a_verification_whose_caller_stopped_waiting_is_dropped_and_the_rest_go_on(
    make_package: PackageFactory,
) -> None:
    async with _busy_pool(make_package) as busy:
        verify = busy.pool.verify
        waiting = [asyncio.ensure_future(verify(busy.folder, ["gated"], _artifacts(f"r-{i}"))) for i in range(3)]
        await asyncio.sleep(0.05)
        waiting[1].cancel()
        await busy.slow
        assert [o.message for o in await waiting[0]] == ["seen: r-0"]
        assert [o.message for o in await waiting[2]] == ["seen: r-2"]
        assert waiting[1].cancelled() and busy.sizes == [1, 2]
