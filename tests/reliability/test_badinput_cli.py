"""Bad input through the real CLI: every user error names the file and the field, exits 2, and shows no traceback.

Sweep configs are written to their own folder in tmp; scenario faults break one file of a copy of the built-in
scenarios (`EVAL_PIPELINES_SCENARIOS_DIR`). `eval_pipelines.cli.main` runs in-process (stderr captured at the
file-descriptor level, so Dagster's console output would show too); one case also runs the installed
`eval-pipelines` executable in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipelines.cli import EXIT_USER_ERROR, main

SCENARIO_ID = "email_ops:1.0.0"
VALID = (
    "name: badinput\n"
    f'scenarios: ["{SCENARIO_ID}"]\n'
    "task_ids: [email_ops_001]\n"
    "rollout_count: 1\n"
    "models:\n"
    "  - {name: sim-oracle, model: sim-oracle, base_url: 'sim://local'}\n"
)


def _write_config(root: Path, text: str, name: str = "sweep.yaml") -> Path:
    folder = root / "sweeps"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _sweep(config: Path, capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["sweep", "--config", str(config), "--skip-assessment", "--sweep-id", "badinput-test"])
    return code, capfd.readouterr().err


def assert_user_error(code: int, err: str, *names: str) -> None:
    assert code == EXIT_USER_ERROR, err
    assert "Traceback" not in err and "Stack Trace" not in err, err
    assert err.count("eval-pipelines: error:") == 1, err
    for name in names:
        assert name in err, f"{name!r} not named in: {err}"


CONFIG_ERRORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "invalid_yaml": ("name: x\nscenarios: [\n", ("invalid YAML at line 3",)),
    "tab_indented_yaml": ("name: x\nmodels:\n\t- name: m\n", ("invalid YAML at line 3",)),
    "empty_file": ("", ("expected a mapping at the top level",)),
    "top_level_list": ("- name: x\n", ("expected a mapping at the top level",)),
    "misspelt_field": (VALID + "rollout_cont: 2\n", ("rollout_cont: Extra inputs are not permitted",)),
    "wrong_type": (VALID.replace("rollout_count: 1", "rollout_count: three"), ("rollout_count:",)),
    "out_of_range": (VALID.replace("rollout_count: 1", "rollout_count: 0"), ("rollout_count:",)),
    "unknown_provider": (
        VALID.replace("base_url: 'sim://local'", "provider: nope, api_key_env: EP_KEY"),
        ("models.0.provider",),
    ),
    "custom_provider_without_base_url": (
        VALID.replace("base_url: 'sim://local'", "api_key_env: EP_KEY"),
        ("models.0", "base_url is required"),
    ),
    "unsafe_model_name": (VALID.replace("name: sim-oracle", "name: 'a/b'"), ("models.0.name",)),
    "unknown_scenario": (VALID.replace(SCENARIO_ID, "nope:1.0"), ("scenarios[0]", "unknown scenario 'nope:1.0'")),
}


@pytest.mark.parametrize("case", sorted(CONFIG_ERRORS))
def test_invalid_sweep_config_is_named_and_exits_2(case: str, cli_env: Path, capfd: pytest.CaptureFixture[str]) -> None:
    text, names = CONFIG_ERRORS[case]
    config = _write_config(cli_env, text)
    code, err = _sweep(config, capfd)
    assert_user_error(code, err, str(config), *names)
    assert not (cli_env / "cli_data" / "service").exists(), "a run was started for an invalid config"


def test_missing_config_file_is_named(cli_env: Path, capfd: pytest.CaptureFixture[str]) -> None:
    missing = cli_env / "nowhere.yaml"
    code, err = _sweep(missing, capfd)
    assert_user_error(code, err, str(missing), "not found")


def test_missing_key_variable_is_named(
    cli_env: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EP_BADINPUT_UNSET_KEY", raising=False)
    config = _write_config(
        cli_env,
        VALID.replace(
            "base_url: 'sim://local'", "base_url: 'http://127.0.0.1:9/v1', api_key_env: EP_BADINPUT_UNSET_KEY"
        ),
    )
    code, err = _sweep(config, capfd)
    assert_user_error(code, err, str(config), "models[sim-oracle].api_key_env", "EP_BADINPUT_UNSET_KEY is not set")


# -- scenario files -----------------------------------------------------------------------------------------

ScenarioBreaker = Callable[[Path], tuple[Path, tuple[str, ...]]]


def _task_file(scenarios: Path) -> Path:
    return scenarios / "email_ops" / "tasks" / "email_ops_005.json"


def _rewrite_json(path: Path, change: Callable[[dict[str, object]], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _task_invalid_json(scenarios: Path) -> tuple[Path, tuple[str, ...]]:
    path = _task_file(scenarios)
    path.write_text('{"task_id": "email_ops_005", "name": ', encoding="utf-8")
    return path, ("invalid JSON at line 1",)


def _task_wrong_fields(scenarios: Path) -> tuple[Path, tuple[str, ...]]:
    path = _task_file(scenarios)

    def wrong(task: dict[str, object]) -> None:
        task["difficulty"] = 7
        del task["description"]

    _rewrite_json(path, wrong)
    return path, ("difficulty:", "description: Field required")


def _task_missing_verifier(scenarios: Path) -> tuple[Path, tuple[str, ...]]:
    path = _task_file(scenarios)
    _rewrite_json(path, lambda task: task.update(verifiers=["no_such_module"]))
    return path, ("verifiers:", "no_such_module")


def _task_unknown_npc(scenarios: Path) -> tuple[Path, tuple[str, ...]]:
    path = _task_file(scenarios)
    _rewrite_json(path, lambda task: task.update(npc_profiles=["nobody_here"]))
    return path, ("npc_profiles:", "nobody_here")


def _template_wrong_field(scenarios: Path) -> tuple[Path, tuple[str, ...]]:
    path = scenarios / "email_ops" / "template.json"
    _rewrite_json(path, lambda template: template.update(tool_servers="email"))
    return path, ("tool_servers:",)


def _template_invalid_json(scenarios: Path) -> tuple[Path, tuple[str, ...]]:
    # Another scenario's template: the catalog reads every template, so this one stops the sweep too.
    path = scenarios / "office_ops" / "template.json"
    path.write_text("{not json", encoding="utf-8")
    return path, ("invalid JSON at line 1",)


def _npcs_wrong_field(scenarios: Path) -> tuple[Path, tuple[str, ...]]:
    path = scenarios / "email_ops" / "npcs.json"
    path.write_text('[{"profile_id": 3}]', encoding="utf-8")
    return path, ("profile_id:",)


SCENARIO_ERRORS: dict[str, ScenarioBreaker] = {
    "task_invalid_json": _task_invalid_json,
    "task_wrong_fields": _task_wrong_fields,
    "task_missing_verifier": _task_missing_verifier,
    "task_unknown_npc": _task_unknown_npc,
    "template_wrong_field": _template_wrong_field,
    "template_invalid_json_in_other_scenario": _template_invalid_json,
    "npcs_wrong_field": _npcs_wrong_field,
}


@pytest.mark.parametrize("case", sorted(SCENARIO_ERRORS))
def test_malformed_scenario_file_is_named_and_exits_2(
    case: str,
    cli_env: Path,
    scenarios_copy: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVAL_PIPELINES_SCENARIOS_DIR", str(scenarios_copy))
    broken, names = SCENARIO_ERRORS[case](scenarios_copy)
    code, err = _sweep(_write_config(cli_env, VALID), capfd)
    assert_user_error(code, err, str(broken), *names)


# -- user errors the CLI does not catch yet ------------------------------------------------------------------


@pytest.mark.slow
def test_unknown_task_id_is_named_and_exits_2(cli_env: Path, capfd: pytest.CaptureFixture[str]) -> None:
    config = _write_config(cli_env, VALID.replace("[email_ops_001]", "[email_ops_001, email_ops_999]"))
    code, err = _sweep(config, capfd)
    assert_user_error(code, err, str(config), "task_ids[1]", "email_ops_999")


@pytest.mark.slow
def test_broken_sibling_sweep_config_is_named_and_exits_2(cli_env: Path, capfd: pytest.CaptureFixture[str]) -> None:
    config = _write_config(cli_env, VALID)
    sibling = _write_config(cli_env, "name: other\nscenarios: [\n", name="other.yaml")
    code, err = _sweep(config, capfd)
    assert_user_error(code, err, str(sibling), "invalid YAML")


@pytest.mark.slow
def test_malformed_seed_file_is_named_and_exits_2(
    cli_env: Path, scenarios_copy: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVAL_PIPELINES_SCENARIOS_DIR", str(scenarios_copy))
    seed = scenarios_copy / "email_ops" / "seed_data" / "mailbox.json"
    seed.write_text('{"emails": [', encoding="utf-8")
    code, err = _sweep(_write_config(cli_env, VALID), capfd)
    assert_user_error(code, err, str(seed), "invalid JSON")


@pytest.mark.slow
def test_unknown_user_model_is_named_and_exits_2(cli_env: Path, capfd: pytest.CaptureFixture[str]) -> None:
    config = _write_config(
        cli_env, VALID.replace("base_url: 'sim://local'}", "base_url: 'sim://local', user_model: nobody}")
    )
    code, err = _sweep(config, capfd)
    assert_user_error(code, err, str(config), "user_model", "nobody")


def test_duplicate_model_names_name_the_models_field(cli_env: Path, capfd: pytest.CaptureFixture[str]) -> None:
    config = _write_config(cli_env, VALID + "  - {name: sim-oracle, model: sim-noop, base_url: 'sim://local'}\n")
    code, err = _sweep(config, capfd)
    assert_user_error(code, err, str(config), "models: ", "repeated: ['sim-oracle']")


# -- the installed executable -------------------------------------------------------------------------------


@pytest.mark.slow
def test_installed_cli_reports_a_user_error_without_traceback(cli_env: Path) -> None:
    """The console script, not `main()`: exit status, one error line, nothing on stdout."""
    executable = Path(sys.executable).parent / "eval-pipelines"
    assert executable.is_file(), f"{executable} is not installed (pip install -e .)"
    config = _write_config(cli_env, VALID.replace("rollout_count: 1", "rollout_count: -1"))
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [str(executable), "sweep", "--config", str(config)], capture_output=True, text=True, timeout=120, env=env
    )
    assert_user_error(done.returncode, done.stderr, str(config), "rollout_count:")
    assert done.stdout == ""


def test_an_absurd_rollout_count_is_refused_before_anything_runs(
    cli_env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code, err = _sweep(_write_config(cli_env, VALID.replace("rollout_count: 1", "rollout_count: 100000")), capfd)
    assert_user_error(code, err, "rollout_count", "100000")
    assert time.monotonic() - started < 30  # no retries of a request that can never succeed


def test_a_verifier_package_that_cannot_load_is_refused_before_anything_runs(
    cli_env: Path, scenarios_copy: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVAL_PIPELINES_SCENARIOS_DIR", str(scenarios_copy))
    init = scenarios_copy / "email_ops" / "verifiers" / "__init__.py"
    init.write_text(init.read_text() + "\nraise RuntimeError('broken verifier package')\n", encoding="utf-8")
    code, err = _sweep(_write_config(cli_env, VALID), capfd)
    assert_user_error(code, err, str(scenarios_copy / "email_ops" / "verifiers"), "broken verifier package")


def test_a_user_error_inside_a_step_is_not_retried(tmp_path: Path) -> None:
    """A request the service refuses (here: too many rollouts, past the CLI's own check) fails its step once,
    marked as a user error, with no step retry."""
    import dagster as dg

    from eval_pipelines.definitions import assets_by_name
    from eval_pipelines.defs.evals.assets import SWEEP_ID_TAG, SWEEP_TAG, USER_ERROR_METADATA
    from eval_pipelines.defs.evals.partitions import MODELS, SCENARIOS, partition_of
    from eval_pipelines.defs.evals.resources import AssessmentPlatform, EvalPaths, EvalService

    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "huge.yaml").write_text(
        VALID.replace("rollout_count: 1", "rollout_count: 20000").replace("badinput", "huge")
    )
    data = tmp_path / "data"
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(MODELS.name or "", ["sim-oracle"])
    instance.add_dynamic_partitions(SCENARIOS.name or "", ["email_ops:1.0.0"])
    result = dg.materialize(
        [assets_by_name()["eval_run"]],
        partition_key=partition_of("sim-oracle", "email_ops:1.0.0"),
        instance=instance,
        resources={
            "paths": EvalPaths(data_dir=str(data), sweeps_dir=str(sweeps)),
            "eval_service": EvalService(data_dir=str(data)),
            "assessment_platform": AssessmentPlatform(data_dir=str(data)),
        },
        tags={SWEEP_TAG: "huge", SWEEP_ID_TAG: "huge-1"},
        raise_on_error=False,
    )
    assert not result.success
    failures = [e for e in result.all_events if e.is_step_failure]
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert len(failures) == 1 and not retries
    data_failure = failures[0].step_failure_data.user_failure_data  # type: ignore[union-attr]
    assert data_failure is not None and USER_ERROR_METADATA in data_failure.metadata
    assert "rollout_count" in (data_failure.description or "") or "10000" in (data_failure.description or "")
