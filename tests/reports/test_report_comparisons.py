"""The report's comparisons: against the sweep config's baseline_model when it names one (every other model is
model A, the baseline B), each pair once otherwise, with the paired test, the MDD and the noise floor shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines.inputs.paths import SWEEPS_DIR_ENV
from eval_pipelines.reports.comparisons import epochs_for, verdict
from eval_pipelines.reports.data import load_report_data
from eval_pipelines.reports.html import render_report_html
from tests.reports.synthetic_warehouse import attempts_with, build

SWEEP = "cmp-20260101"
COUNTS = {
    "model-a": {"t1": (3, 3), "t2": (3, 2), "t3": (3, 1)},
    "model-b": {"t1": (3, 1), "t2": (3, 1), "t3": (3, 0)},
    "model-c": {"t1": (3, 2), "t2": (3, 2), "t3": (3, 2)},
}


def _sweep_config(directory: Path, baseline: str | None) -> None:
    models = "".join(f"  - name: {m}\n    model: {m}\n    base_url: sim://local\n" for m in COUNTS)
    extra = f"baseline_model: {baseline}\n" if baseline else ""
    (directory / "cmp.yaml").write_text(f"name: cmp\nscenarios: ['*']\nmodels:\n{models}{extra}")


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    attempts = []
    for model, counts in COUNTS.items():
        attempts += attempts_with(counts, model_name=model, sweep_id=SWEEP)
    return build(tmp_path, attempts)


def test_every_model_against_the_baseline(catalog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    _sweep_config(sweeps, "model-b")
    monkeypatch.setenv(SWEEPS_DIR_ENV, str(sweeps))
    data = load_report_data(catalog, SWEEP)
    assert data.baseline == "model-b"
    assert [(r["model_a"], r["model_b"]) for r in data.comparisons] == [("model-a", "model-b"), ("model-c", "model-b")]
    page = render_report_html(
        data, dict.fromkeys(("pass_rate", "pass_hat_k", "cost", "task_heatmap"), b""), source="test"
    )
    assert "against the baseline <code>model-b</code>" in page
    assert "McNemar p" in page and "MDD" in page and "Noise floor" in page
    # The noise floor has one row per model, with its flip rate: model-a flips on t2 and t3 (2/3 each), not t1.
    floor = {r["model_name"]: r for r in data.noise_floor}
    assert floor["model-a"]["flip_rate"] == pytest.approx((0 + 2 / 3 + 2 / 3) / 3)


def test_every_pair_once_without_a_baseline(catalog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    _sweep_config(sweeps, None)
    monkeypatch.setenv(SWEEPS_DIR_ENV, str(sweeps))
    data = load_report_data(catalog, SWEEP)
    assert data.baseline is None
    pairs = {frozenset((r["model_a"], r["model_b"])) for r in data.comparisons}
    assert len(data.comparisons) == len(pairs) == 3
    assert all(r["diff"] >= 0 for r in data.comparisons)


def test_verdict_and_epochs_for_a_chosen_difference() -> None:
    row = {"diff": 0.04, "mdd": 0.09, "n_tasks": 30, "sigma2_between": 0.0, "sigma2_within": 0.2}
    assert verdict(row) == "diff +4.0 pts, below the smallest this sweep can see (9.0 pts)"
    assert verdict({**row, "diff": -0.12}).startswith("diff -12.0 pts, larger than")
    # A larger difference needs fewer epochs; an unknown within-task variance gives none.
    assert epochs_for(row, 0.20) < epochs_for(row, 0.10)
    assert epochs_for({**row, "sigma2_within": None}) is None


def test_cli_table_against_the_baseline(catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eval_pipelines.cli import print_comparisons
    from eval_pipelines.schemas.sweep import SweepConfig

    models = [{"name": m, "model": m, "base_url": "sim://local"} for m in COUNTS]
    sweep = SweepConfig(name="cmp", scenarios=["*"], models=models, baseline_model="model-b", detectable_difference=0.2)
    print_comparisons(catalog, SWEEP, sweep)
    out = capsys.readouterr().out
    assert "Paired comparisons against model-b" in out and "epochs for 20 pts" in out
    # model-a vs model-b: task rates 1 - 1/3, 2/3 - 1/3, 1/3 - 0, a mean of 4/9 = +44.4 points.
    line = next(line for line in out.splitlines() if "model-a" in line)
    assert "+44.4" in line and "model-b" in line
    assert sum("scn:1.0.0" in line for line in out.splitlines()) == 2  # model-a and model-c, each vs model-b
