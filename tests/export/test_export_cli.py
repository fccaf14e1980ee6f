"""`eval-pipelines export` on the reports suite's synthetic two-sweep catalog: the default sweep, filters, exit 2
on bad input, and reading in batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.cli import EXIT_USER_ERROR, main
from eval_pipelines.reports.export import ExportError, SweepReader, export_results
from tests.export.conftest import scalar
from tests.reports.conftest import NEW_SWEEP, OLD_SWEEP


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_default_sweep_is_the_most_recently_started(report_catalog: Path, tmp_path: Path) -> None:
    """`zz-old` sorts after the new sweep's id but started earlier: the default follows time, as the report's."""
    out = tmp_path / "r.jsonl"
    assert main(["export", "--format", "jsonl", "--db", str(report_catalog), "--out", str(out)]) == 0
    lines = _lines(out)
    assert {line["sweep_id"] for line in lines} == {NEW_SWEEP}
    assert len(lines) == scalar(report_catalog, "select count(*) from rollouts where sweep_id = ?", [NEW_SWEEP])
    older = export_results(report_catalog, tmp_path / "old.jsonl", "jsonl", sweep_id=OLD_SWEEP)
    assert older.sweep_id == OLD_SWEEP and {line["sweep_id"] for line in _lines(tmp_path / "old.jsonl")} == {OLD_SWEEP}


def test_model_and_scenario_filters(report_catalog: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    argv = ["export", "--format", "jsonl", "--db", str(report_catalog), "--out", str(out)]
    assert main([*argv, "--model", "sim-noop", "--scenario", "calendar:2.0.0"]) == 0
    lines = _lines(out)
    assert lines and {(line["model_name"], line["scenario_id"]) for line in lines} == {("sim-noop", "calendar:2.0.0")}
    assert all(line["is_simulated"] and line["reward"] == 0.0 for line in lines)
    assert main([*argv, "--model", "gpt-real"]) == 0
    assert {line["scenario_id"] for line in _lines(out)} == {"email_ops:1.0.0", "calendar:2.0.0"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sweep", "no-such-sweep"], "unknown sweep 'no-such-sweep'"),
        (["--model", "no-such-model"], "has no rollouts of model 'no-such-model'; its models: ['gpt-real'"),
        (["--scenario", "email_ops"], "its scenarios: ['calendar:2.0.0', 'email_ops:1.0.0']"),
        (["--model", "gpt-rael"], "its scenarios: ['calendar:2.0.0', 'email_ops:1.0.0']; did you mean 'gpt-real'?"),
        (
            ["--sweep", "zz-odl"],
            "sweeps in the catalog: ['nightly-0101', 'nightly-0102', 'zz-old']; did you mean 'zz-old'?",
        ),
    ],
    ids=["unknown_sweep", "unknown_model", "unknown_scenario", "mistyped_model", "mistyped_sweep"],
)
def test_bad_input_exits_2_naming_what_exists(
    report_catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = ["export", "--format", "inspect", "--db", str(report_catalog), "--out", str(tmp_path / "x"), *extra]
    assert main(argv) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_no_catalog_wrong_out_and_unknown_format_exit_2(
    report_catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.duckdb"
    assert main(["export", "--format", "jsonl", "--db", str(missing), "--out", str(tmp_path / "r.jsonl")]) == 2
    assert "no catalog yet; run `eval-pipelines sweep` first" in capsys.readouterr().err
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for fmt in ("inspect", "parquet"):
        assert main(["export", "--format", fmt, "--db", str(report_catalog), "--out", str(a_file)]) == 2
        assert "is a file" in capsys.readouterr().err
    assert main(["export", "--format", "jsonl", "--db", str(report_catalog), "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["export", "--format", "xml", "--db", str(report_catalog), "--out", str(tmp_path / "x")])
    assert exited.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err
    with pytest.raises(ExportError, match="unknown format 'xml'"):
        export_results(report_catalog, tmp_path / "x", "xml")


def test_rollouts_are_read_in_batches_and_every_one_is_written(
    report_catalog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch size far below the rollout count: no batch holds more rollouts (and their transcripts) than it,
    and every rollout still reaches the file."""
    batches: list[int] = []
    read_batch = SweepReader._with_transcripts

    def spy(self: SweepReader, group: Any, rows: list[dict[str, Any]]) -> Any:
        batches.append(len(rows))
        return read_batch(self, group, rows)

    monkeypatch.setattr(SweepReader, "_with_transcripts", spy)
    total = scalar(report_catalog, "select count(*) from rollouts where sweep_id = ?", [NEW_SWEEP])
    out = tmp_path / "r.jsonl"
    summary = export_results(report_catalog, out, "jsonl", batch_size=3, include_errors=True)
    assert max(batches) == 3 and sum(batches) == total == summary.rollouts == len(_lines(out))
    assert summary.batches == len(batches) > total // 3
    assert len({line["rollout_id"] for line in _lines(out)}) == total

    batches.clear()
    logs = export_results(report_catalog, tmp_path / "logs", "inspect", batch_size=3)
    assert max(batches) == 3 and sum(batches) == total == logs.rollouts
    written = [json.loads(path.read_text()) for path in logs.files]
    assert sum(len(log["samples"]) for log in written) == total
    assert all(log["results"]["total_samples"] == len(log["samples"]) for log in written)
