"""`eval-pipelines reverify` through the real CLI (`eval_pipelines.cli.main`, in-process): after one scenario's verifier
changes it re-verifies that scenario's stored partitions and no other's, appends a second version, prints both
versions' pass rates, records it in Dagster (one run: each partition's `verification` materialisation with the
asset's metadata and both checks' evaluations, the catalog's materialisation), and has nothing left to do on a
second call; `--sweep` and `--all` widen or narrow the selection; bad input exits 2, a failed step or record 1.

Two sweeps of simulated models over copies of two built-in scenarios, on a temp data directory and Dagster home.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from eval_pipelines.cli import EXIT_STEP_FAILED, EXIT_USER_ERROR, main
from eval_pipelines.defs import reverify_record
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, build_error_check, build_scores_check
from eval_pipelines.defs.evals.automation import REVERIFY_TAG
from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
from eval_pipelines.defs.reverify import ERRORS_CHECK, SCORES_CHECK
from eval_pipelines.inputs.paths import DATA_DIR_ENV, SCENARIOS_DIR_ENV, SWEEPS_DIR_ENV, builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.verifiers.loader import package_version, verifier_version
from tests.reliability.support_runs import make_dagster_home

EMAIL = "email_ops:1.0.0"
OFFICE = "office_ops:1.0.0"
#: Both scenarios, both models: the sweep whose `email_ops` verdicts change.
SWEEP_A = (
    "name: rv-a\n"
    f'scenarios: ["{EMAIL}", "{OFFICE}"]\n'
    "task_ids: [email_ops_001, email_ops_002, office_ops_001]\n"
    "rollout_count: 1\n"
    "models:\n"
    "  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n"
    "  - {name: sim-noop, model: sim-noop, base_url: 'sim://local'}\n"
)
#: Another sweep of the oracle on email_ops_001 only, for `--sweep`.
SWEEP_B = (
    "name: rv-b\n"
    f'scenarios: ["{EMAIL}"]\n'
    "task_ids: [email_ops_001]\n"
    "rollout_count: 1\n"
    "models:\n"
    "  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n"
)

NOTHING_STALE = (
    "nothing to re-verify: every stored rollout has verdicts at its scenario's current verifier version "
    "(--all re-verifies them anyway)"
)


@dataclass(frozen=True)
class Project:
    scenarios: Path
    sweeps: Path
    data: Path
    dagster_home: Path

    def verification_files(self, model: str, scenario_key: str) -> dict[str, int]:
        """File name -> mtime (ns) of one partition's verdict files."""
        folder = self.data / "warehouse" / "verifications" / f"model={model}" / f"scenario={scenario_key}"
        return {p.name: p.stat().st_mtime_ns for p in sorted(folder.glob("*.parquet"))}

    def query(self, sql: str) -> list[tuple[object, ...]]:
        con = duckdb.connect(str(self.data / "eval.duckdb"), read_only=True)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()

    def reverify_runs(self) -> list[Recorded]:
        """What each re-verification recorded in Dagster, oldest first."""
        with dg.DagsterInstance.get() as instance:
            runs = instance.get_runs(filters=dg.RunsFilter(job_name=reverify_record.REVERIFY_JOB))
            return [Recorded.of(instance, run) for run in reversed(runs)]

    def first_materialization(self, asset: str, partition: str | None = None) -> dg.AssetMaterialization:
        """An asset's first materialisation (of a partition): the sweep's asset run."""
        with dg.DagsterInstance.get() as instance:
            partitions = [partition] if partition is not None else None
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=partitions),
                limit=100,
                ascending=True,
            ).records
            materialization = records[0].asset_materialization
            assert materialization is not None
            return materialization


@dataclass(frozen=True)
class Recorded:
    """One `__cli_reverify` run: its status and tags, the `verification` materialisations by partition (metadata,
    tags, storage id), the check evaluations by (partition, check) (passed, the storage id they target), and the
    catalog's materialisation metadata (None when it has none)."""

    status: dg.DagsterRunStatus
    tags: dict[str, str]
    verifications: dict[str, tuple[dict[str, object], dict[str, str], int]]
    checks: dict[tuple[str, str], tuple[bool, int | None]]
    catalog: dict[str, Any] | None

    @classmethod
    def of(cls, instance: dg.DagsterInstance, run: dg.DagsterRun) -> Recorded:
        verifications: dict[str, tuple[dict[str, object], dict[str, str], int]] = {}
        catalog: dict[str, Any] | None = None
        for record in instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records:
            materialization = record.asset_materialization
            assert materialization is not None
            if materialization.asset_key == dg.AssetKey("eval_catalog"):
                catalog = dict(materialization.metadata)
                continue
            assert materialization.asset_key == dg.AssetKey("verification") and materialization.partition
            metadata = {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}
            # its id in the cross-run index, which check evaluations name (a run's own shard numbers its events anew)
            (indexed,) = [
                r.storage_id
                for r in instance.fetch_materializations(
                    dg.AssetRecordsFilter(
                        asset_key=materialization.asset_key, asset_partitions=[materialization.partition]
                    ),
                    limit=100,
                ).records
                if r.run_id == run.run_id
            ]
            verifications[materialization.partition] = (metadata, dict(materialization.tags or {}), indexed)
        checks: dict[tuple[str, str], tuple[bool, int | None]] = {}
        for record in instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ).records:
            event = record.event_log_entry.dagster_event
            assert event is not None
            evaluation = event.event_specific_data
            assert isinstance(evaluation, dg.AssetCheckEvaluation) and evaluation.partition
            target = evaluation.target_materialization_data
            checks[(evaluation.partition, evaluation.check_name)] = (
                evaluation.passed,
                target.storage_id if target is not None else None,
            )
        return cls(run.status, dict(run.tags), verifications, checks, catalog)

    def assert_checks_target_their_materializations(self) -> None:
        assert {p for p, _ in self.checks} == set(self.verifications)
        for (partition, name), (_, target) in self.checks.items():
            assert name in (SCORES_CHECK, ERRORS_CHECK)
            assert target == self.verifications[partition][2], (partition, name)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    scenarios = tmp_path / "scenarios"
    for family in ("email_ops", "office_ops"):
        shutil.copytree(
            builtin_scenarios_dir() / family, scenarios / family, ignore=shutil.ignore_patterns("__pycache__")
        )
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    project = Project(scenarios, sweeps, tmp_path / "data", make_dagster_home(tmp_path / "dagster_home"))
    monkeypatch.setenv(SCENARIOS_DIR_ENV, str(scenarios))
    monkeypatch.setenv(SWEEPS_DIR_ENV, str(sweeps))
    monkeypatch.setenv(DATA_DIR_ENV, str(project.data))
    monkeypatch.setenv("DAGSTER_HOME", str(project.dagster_home))
    yield project


def _run(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capfd.readouterr()
    return code, captured.out, captured.err


def _sweep(project: Project, capfd: pytest.CaptureFixture[str], name: str, text: str) -> None:
    config = project.sweeps / f"{name}.yaml"
    config.write_text(text, encoding="utf-8")
    code, _, err = _run(capfd, "sweep", "--config", str(config), "--skip-assessment", "--sweep-id", name)
    assert code == 0, err[-3000:]


def _table(out: str) -> dict[tuple[str, str, str], list[tuple[str, str, str, str]]]:
    """The printed version table: (scenario, model, sweep) -> [(verifiers changed, n, pass rate, change)] per
    verification pass, oldest first (the group's first row names it, the rows below leave those cells blank)."""
    groups: dict[tuple[str, str, str], list[tuple[str, str, str, str]]] = {}
    key = ("", "", "")
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if not line.startswith("│") or len(cells) != 9:
            continue
        scenario, model, sweep, _verified, changed, n, rate, _errors, change = cells
        if scenario:
            key = (scenario, model, sweep)
        groups.setdefault(key, []).append((changed, n, rate, change))
    return groups


def _tighten(project: Project, task_id: str) -> tuple[str, str]:
    """Make the verifier of `task_id` fail every rollout, as an edit would; returns its name and how the table
    shows the change (`name old -> new`, 8 characters of each version)."""
    (module,) = ScenarioCatalog(project.scenarios).get(EMAIL).task(task_id).verifiers
    folder = project.scenarios / "email_ops" / "verifiers"
    before = verifier_version(folder, module)
    verifier = folder / f"{module}.py"
    verifier.write_text(
        verifier.read_text() + "\n\ndef verify(run_artifacts):  # tightened\n    return False, 'tightened'\n"
    )
    return module, f"{module} {before[:8]} -> {verifier_version(folder, module)[:8]}"


@pytest.mark.slow
def test_a_verifier_edit_is_reverified_for_its_scenario_only_and_compared_by_version(
    project: Project, capfd: pytest.CaptureFixture[str]
) -> None:
    _sweep(project, capfd, "rv-a", SWEEP_A)
    _sweep(project, capfd, "rv-b", SWEEP_B)
    code, out, err = _run(capfd, "reverify")
    assert code == 0, err
    assert out.strip() == NOTHING_STALE

    email_before = package_version(project.scenarios / "email_ops" / "verifiers")
    office_files = {m: project.verification_files(m, "office_ops_1.0.0") for m in ("sim-oracle", "sim-noop")}
    verifier, change = _tighten(project, "email_ops_001")
    email_after = package_version(project.scenarios / "email_ops" / "verifiers")

    # --sweep: only rv-b's rollouts, so only the oracle's email_ops partition (sim-noop is not in rv-b).
    code, out, err = _run(capfd, "reverify", "--sweep", "rv-b")
    assert code == 0, err
    assert set(project.verification_files("sim-oracle", "email_ops_1.0.0")) == {
        f"verifiers-{email_before}-rv-a.parquet",
        f"verifiers-{email_before}-rv-b.parquet",
        f"verifiers-{email_after}-rv-b.parquet",
    }
    assert _table(out) == {(EMAIL, "sim-oracle", "rv-b"): [("", "1", "1.000", ""), (change, "1", "0.000", "-1.000")]}
    # Dagster holds the new verdicts: one run, the partition's materialisation and its checks, the catalog's.
    (record,) = project.reverify_runs()
    oracle, noop = str(partition_of("sim-oracle", EMAIL)), str(partition_of("sim-noop", EMAIL))
    assert record.status == dg.DagsterRunStatus.SUCCESS and record.catalog
    assert (record.tags[REVERIFY_TAG], record.tags[SWEEP_ID_TAG]) == (email_after, "rv-b")
    assert set(record.verifications) == {oracle}
    metadata, tags, storage_id = record.verifications[oracle]
    assert tags == {REVERIFY_TAG: email_after}
    assert {k: metadata[k] for k in ("verifier_version", "rollouts_verified", "passed", "pass_rate")} == {
        "verifier_version": email_after,
        "rollouts_verified": 1,
        "passed": 0,
        "pass_rate": 0.0,
    }
    assert metadata["dagster/row_count"] == 1
    # the same metadata as the asset's own materialisation in the sweep's run, the same table metadata
    swept = project.first_materialization("verification", str(partition_of("sim-oracle", EMAIL))).metadata
    assert set(metadata) == set(swept)
    for key in ("dagster/table_name", "dagster/column_schema"):
        assert metadata[key] == swept[key].value, key
    catalog = project.first_materialization("eval_catalog").metadata
    assert set(record.catalog) == set(catalog)
    assert record.catalog["row_counts"].schema == catalog["row_counts"].schema
    assert record.checks == {(oracle, SCORES_CHECK): (True, storage_id), (oracle, ERRORS_CHECK): (True, storage_id)}

    # The rest of what the edit left stale: email_ops x both models, every sweep; office_ops untouched.
    code, out, err = _run(capfd, "reverify")
    assert code == 0, err
    assert "2/2" in err
    table = _table(out)
    assert {k: [(n, rate, change) for _, n, rate, change in v] for k, v in table.items()} == {
        (EMAIL, "sim-noop", "rv-a"): [("2", "0.000", ""), ("2", "0.000", "+0.000")],
        (EMAIL, "sim-oracle", "rv-a"): [("2", "1.000", ""), ("2", "0.500", "-0.500")],
        (EMAIL, "sim-oracle", "rv-b"): [("1", "1.000", ""), ("1", "0.000", "-1.000")],
    }
    (record,) = project.reverify_runs()[1:]
    assert record.status == dg.DagsterRunStatus.SUCCESS and record.catalog
    assert record.tags[REVERIFY_TAG] == email_after and SWEEP_ID_TAG not in record.tags
    assert {p: (m["rollouts_verified"], m["passed"], t) for p, (m, t, _) in record.verifications.items()} == {
        oracle: (3, 1, {REVERIFY_TAG: email_after}),
        noop: (2, 0, {REVERIFY_TAG: email_after}),
    }
    record.assert_checks_target_their_materializations()
    assert {m: project.verification_files(m, "office_ops_1.0.0") for m in office_files} == office_files
    assert project.query(
        f"select sweep_id, count(distinct verifier_version) from verifications where verifier = '{verifier}' "
        "group by all order by all"
    ) == [("rv-a", 2), ("rv-b", 2)]
    assert project.query(
        "select model_name, count(distinct verified_at), count(distinct verifier_version) from verifications "
        f"where scenario_id = '{OFFICE}' group by all order by all"
    ) == [("sim-noop", 1, 1), ("sim-oracle", 1, 1)]
    # The current pass agrees with the scoring rule of every other view.
    assert project.query(
        "select sweep_id, pass_rate from scenario_model_metrics "
        f"where scenario_id = '{EMAIL}' and model_name = 'sim-oracle' order by all"
    ) == [("rv-a", 0.5), ("rv-b", 0.0)]

    code, out, err = _run(capfd, "reverify")
    assert code == 0, err
    assert out.strip() == NOTHING_STALE

    # --all re-verifies what is not stale: office_ops again, at the same version (its pass is replaced).
    code, out, err = _run(capfd, "reverify", "--all", "--scenario", OFFICE)
    assert code == 0, err
    assert {k: [(n, rate) for _, n, rate, _ in v] for k, v in _table(out).items()} == {
        (OFFICE, "sim-noop", "rv-a"): [("1", "0.000")],
        (OFFICE, "sim-oracle", "rv-a"): [("1", "1.000")],
    }
    for model, before in office_files.items():
        after = project.verification_files(model, "office_ops_1.0.0")
        assert set(after) == set(before) and all(after[f] > before[f] for f in before)


@pytest.mark.slow
def test_a_failed_verification_exits_1_naming_the_partition(
    project: Project, capfd: pytest.CaptureFixture[str]
) -> None:
    _sweep(project, capfd, "rv-b", SWEEP_B)
    # A verifier package that cannot be imported fails the step (a verifier's own error would be a verdict).
    (project.scenarios / "email_ops" / "verifiers" / "__init__.py").unlink()
    code, _, err = _run(capfd, "reverify")
    assert code == EXIT_STEP_FAILED, err
    assert f"eval-pipelines: failed: sim-oracle|{EMAIL}: WorkerStartError: " in err, err
    assert "Traceback" not in err and "Stack Trace" not in err, err
    # Dagster's record of it fails too, and names the partition; the catalog was rebuilt all the same.
    (record,) = project.reverify_runs()
    assert record.status == dg.DagsterRunStatus.FAILURE and record.verifications == {} and record.catalog
    with dg.DagsterInstance.get() as instance:
        (failure,) = instance.get_records_for_run(
            project_run_id(instance), of_type=dg.DagsterEventType.STEP_FAILURE
        ).records
        assert f"sim-oracle|{EMAIL}: WorkerStartError" in str(failure.event_log_entry.dagster_event)


@pytest.mark.slow
def test_a_failed_record_in_dagster_exits_1_and_still_prints_the_new_pass_rates(
    project: Project, capfd: pytest.CaptureFixture[str]
) -> None:
    _sweep(project, capfd, "rv-b", SWEEP_B)
    _, change = _tighten(project, "email_ops_001")
    (project.dagster_home / "dagster.yaml").write_text("storage: [not, a, mapping]\n", encoding="utf-8")
    code, out, err = _run(capfd, "reverify")
    assert code == EXIT_STEP_FAILED, err
    assert "eval-pipelines: failed: dagster: the verdicts are written, but not recorded in Dagster: " in err, err
    assert _table(out) == {(EMAIL, "sim-oracle", "rv-b"): [("", "1", "1.000", ""), (change, "1", "0.000", "-1.000")]}


def test_the_recorder_names_tags_partitions_and_checks_as_the_assets_do() -> None:
    assert (reverify_record.REVERIFY_TAG, reverify_record.SWEEP_ID_TAG) == (REVERIFY_TAG, SWEEP_ID_TAG)
    assert (MODELS.name, SCENARIOS.name) == (reverify_record.MODELS, reverify_record.SCENARIOS)
    assert reverify_record.partition_of("sim-oracle", EMAIL) == str(partition_of("sim-oracle", EMAIL))
    assert [k.name for k in build_scores_check().check_keys] == [SCORES_CHECK]
    assert [k.name for k in build_error_check().check_keys] == [ERRORS_CHECK]


def project_run_id(instance: dg.DagsterInstance) -> str:
    (run,) = instance.get_runs(filters=dg.RunsFilter(job_name=reverify_record.REVERIFY_JOB))
    return run.run_id


def test_an_unknown_scenario_exits_2_naming_the_option(project: Project, capfd: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capfd, "reverify", "--scenario", EMAIL, "nope")
    assert code == EXIT_USER_ERROR
    assert err.strip() == (
        f"eval-pipelines: error: --scenario: unknown scenario 'nope'; known scenarios: ['{EMAIL}', '{OFFICE}']"
    )


def test_an_unknown_sweep_exits_2_and_nothing_stored_is_nothing_to_do(
    project: Project, capfd: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capfd, "reverify", "--sweep", "nope")
    assert code == EXIT_USER_ERROR
    assert (
        err.strip() == "eval-pipelines: error: --sweep: no stored rollouts of sweep 'nope'; sweeps in the warehouse: []"
    )
    code, out, err = _run(capfd, "reverify", "--scenario", OFFICE)
    assert (code, out.strip(), err) == (0, "nothing to re-verify: no stored rollouts of the selected scenarios", "")
