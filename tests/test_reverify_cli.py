"""`eval-pipelines reverify` through the real CLI (`eval_pipelines.cli.main`, in-process): after one scenario's verifier
changes it re-verifies that scenario's stored partitions and no other's, appends a second version, prints both
versions' pass rates, and has nothing left to do on a second call; `--sweep` and `--all` widen or narrow the
selection; bad input exits 2 and a failed step 1.

Two sweeps of simulated models over copies of two built-in scenarios, on a temp data directory and Dagster home.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_pipelines.cli import EXIT_STEP_FAILED, EXIT_USER_ERROR, main
from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG
from eval_pipelines.defs.evals.automation import REVERIFY_TAG
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

    def reverify_runs(self) -> list[dict[str, str]]:
        """The tags of every re-verification run on the instance, oldest first."""
        with dg.DagsterInstance.get() as instance:
            runs = instance.get_runs(filters=dg.RunsFilter(job_name="__cli_reverify_partition"))
            return [dict(r.tags) for r in reversed(runs)]


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
    (run,) = project.reverify_runs()
    assert (run["dagster/partition"], run[REVERIFY_TAG], run[SWEEP_ID_TAG]) == (
        f"sim-oracle|{EMAIL}",
        email_after,
        "rv-b",
    )

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
    runs = project.reverify_runs()[1:]
    assert sorted(r["dagster/partition"] for r in runs) == [f"sim-noop|{EMAIL}", f"sim-oracle|{EMAIL}"]
    assert all(r[REVERIFY_TAG] == email_after and SWEEP_ID_TAG not in r for r in runs)
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
