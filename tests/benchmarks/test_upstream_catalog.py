"""Materialisation and sweep plumbing with a fake upstream benchmark: a family is made once per pinned version
under `<data>/benchmarks/`, the scenario catalog reads it, `*` leaves it out, and a sweep entry `{id, tasks,
split, limit}` chooses its tasks (a plain string stays the whole scenario)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from eval_pipelines.benchmarks import catalog
from eval_pipelines.inputs.paths import DATA_DIR_ENV
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.inputs.sweeps import ConfigError, includes_scenario, load_sweep, selected_task_ids, sweep_scenarios
from eval_pipelines.pipeline.steps import launch_request
from eval_pipelines.schemas.sweep import SweepConfig
from tests.benchmarks.upstream_fake import FakeAdapter, python_override

FAMILY = "fakebench_counter"
SIM_MODEL = {"name": "sim-oracle", "model": "sim-oracle", "base_url": "sim://local"}


@pytest.fixture
def adapter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeAdapter]:
    monkeypatch.setenv(*python_override())
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    fake = FakeAdapter(splits={"train": ["counter_1", "counter_3"], "test": ["counter_10", "counter_2", "counter_0"]})
    catalog.register(fake)
    yield fake
    catalog.unregister(fake.name)


def _sweep(*scenarios: object, **extra: object) -> SweepConfig:
    return SweepConfig.model_validate({"name": "s", "scenarios": list(scenarios), "models": [SIM_MODEL], **extra})


def _catalog(tmp_path: Path) -> ScenarioCatalog:
    return ScenarioCatalog(root=tmp_path / "scenarios")  # the benchmarks under $EVAL_PIPELINES_DATA_DIR


def test_a_family_is_materialised_once_per_pinned_version(adapter: FakeAdapter, tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = catalog.materialise(FAMILY, data)
    assert folder == data / "benchmarks" / FAMILY
    assert json.loads((folder / "template.json").read_text())["scenario_id"] == f"{FAMILY}:1.0"
    assert len(list((folder / "tasks").glob("*.json"))) == 12
    assert catalog.materialise(FAMILY, data) == folder and adapter.materialised == 1
    adapter.version = "2.0"  # a new pin is a new benchmark identity: made again
    catalog.materialise(FAMILY, data)
    assert adapter.materialised == 2
    assert [p.name for p in (data / "benchmarks").iterdir() if p.is_dir()] == [FAMILY]  # no staging folder left


def test_unknown_and_refused_families_are_config_errors(adapter: FakeAdapter, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not supported yet: needs user-side tools"):
        catalog.materialise("fakebench_telecom", tmp_path)
    with pytest.raises(ConfigError, match="unknown benchmark"):
        catalog.materialise("nobench", tmp_path)


def test_the_catalog_reads_benchmarks_but_star_skips_them(adapter: FakeAdapter, tmp_path: Path) -> None:
    scenarios = _catalog(tmp_path)
    # named, the benchmark is made before the sweep's scenarios are resolved
    named = sweep_scenarios(_sweep(FAMILY), scenarios, prepare=catalog.ensure_materialised)
    assert [s.scenario_id for s in named] == [f"{FAMILY}:1.0"] and named[0].benchmark
    assert f"{FAMILY}:1.0" in scenarios.ids()
    assert all(not s.benchmark for s in sweep_scenarios(_sweep("*"), scenarios))
    assert f"{FAMILY}:1.0" not in [s.scenario_id for s in sweep_scenarios(_sweep("*"), scenarios)]
    both = sweep_scenarios(_sweep("*", {"id": FAMILY, "limit": 2}), scenarios, prepare=catalog.ensure_materialised)
    assert f"{FAMILY}:1.0" in [s.scenario_id for s in both]


def test_a_sweep_entry_chooses_exactly_its_tasks(adapter: FakeAdapter, tmp_path: Path) -> None:
    scenarios = _catalog(tmp_path)
    catalog.materialise(FAMILY, tmp_path / "data")
    scenarios.refresh()
    scenario = scenarios.get(FAMILY)
    picked = _sweep({"id": FAMILY, "tasks": ["counter_7", "counter_2"]})
    assert selected_task_ids(picked, scenario) == ["counter_7", "counter_2"]
    request = launch_request(picked, picked.models[0], scenario, "sweep-1")
    assert request.task_ids == ["counter_7", "counter_2"]
    assert selected_task_ids(_sweep({"id": FAMILY, "limit": 3}), scenario) == ["counter_0", "counter_1", "counter_2"]
    test_split = _sweep({"id": f"{FAMILY}:1.0", "split": "test", "limit": 2})
    assert selected_task_ids(test_split, scenario) == ["counter_0", "counter_2"]
    assert len(selected_task_ids(_sweep(FAMILY), scenario)) == 12  # a plain string: every task


def test_bad_entries_name_the_field(adapter: FakeAdapter, tmp_path: Path) -> None:
    scenarios = _catalog(tmp_path)
    catalog.materialise(FAMILY, tmp_path / "data")
    scenarios.refresh()
    scenario = scenarios.get(FAMILY)
    with pytest.raises(ConfigError, match=r"scenarios\[fakebench_counter\]\.tasks: unknown task"):
        selected_task_ids(_sweep({"id": FAMILY, "tasks": ["counter_99"]}), scenario)
    with pytest.raises(ConfigError, match=r"\.split: unknown split 'dev'"):
        selected_task_ids(_sweep({"id": FAMILY, "split": "dev"}), scenario)
    (scenario.root / "splits.json").unlink()
    with pytest.raises(ConfigError, match="has no upstream splits"):
        selected_task_ids(_sweep({"id": FAMILY, "split": "test"}), scenario)


def test_sweep_files_accept_entries_and_plain_strings(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    scenarios = ["email_ops", {"id": "tau2_airline", "split": "test", "limit": 20}]
    path.write_text(yaml.safe_dump({"name": "s", "scenarios": scenarios, "models": [SIM_MODEL]}))
    sweep = load_sweep(path)
    assert sweep.scenario_ids == ["email_ops", "tau2_airline"]
    path.write_text(yaml.safe_dump({"name": "s", "scenarios": [{"id": "x", "limit": 0}], "models": [SIM_MODEL]}))
    with pytest.raises(ConfigError, match="limit"):
        load_sweep(path)


def test_star_does_not_claim_a_benchmark_partition(adapter: FakeAdapter, tmp_path: Path) -> None:
    catalog.materialise(FAMILY, tmp_path / "data")
    key = f"{FAMILY}_1.0"
    assert not includes_scenario(_sweep("*"), key)
    assert includes_scenario(_sweep("*"), "email_ops_1.0.0")
    assert includes_scenario(_sweep("*", {"id": f"{FAMILY}:1.0", "limit": 1}), key)


def test_the_dagster_partition_sync_materialises_the_benchmarks_a_sweep_names(adapter: FakeAdapter) -> None:
    from eval_pipelines.defs.evals.automation import sweep_partition_keys

    keys = sweep_partition_keys(_sweep("*", {"id": FAMILY, "limit": 1}))
    assert adapter.materialised == 1
    assert f"{FAMILY}:1.0" in {key.keys_by_dimension["scenario"] for key in keys}
    assert adapter.materialised == 1 and len(sweep_partition_keys(_sweep("*"))) == len(keys) - 1


def test_a_family_made_by_other_adapter_code_is_made_again(adapter: FakeAdapter, tmp_path: Path) -> None:
    """The gold and the task format are the adapter's: an upgrade that changes its code remakes the family."""
    code = tmp_path / "adapter_code"
    code.mkdir()
    script = code / adapter.worker_script.name
    script.write_bytes(adapter.worker_script.read_bytes())
    adapter.worker_script = script
    data = tmp_path / "data"
    catalog.materialise(FAMILY, data)
    catalog.materialise(FAMILY, data)
    assert adapter.materialised == 1
    (code / "verifier_template.py").write_text("# the verifier changed\n")
    assert not catalog.is_materialised(FAMILY, data)
    catalog.materialise(FAMILY, data)
    assert adapter.materialised == 2
