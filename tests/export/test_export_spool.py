"""The spool a model x scenario is read through (`reader._Spool`): however small its files (many per group, batches
across their bounds), the exports are the same bytes, and nothing of it is left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines.reports.export import export_results, reader
from tests.export.conftest import SweepCatalog


def _exports(catalog: SweepCatalog, out: Path, spool: Path) -> dict[Path, bytes]:
    common = {"sweep_id": catalog.sweep_id, "batch_size": 3, "spool_dir": spool}
    export_results(catalog.db, out / "rollouts.jsonl", "jsonl", include_errors=True, **common)
    export_results(catalog.db, out / "logs", "inspect", **common)
    return {path.relative_to(out): path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}


@pytest.mark.parametrize(("per_file", "max_files"), [(1, 200), (1, 2)], ids=["one_rollout_per_file", "capped"])
def test_spool_file_size_does_not_change_the_exports(
    sweep_catalog: SweepCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_file: int, max_files: int
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    expected = _exports(sweep_catalog, tmp_path / "default", spool)
    assert len(expected) > 2  # the jsonl file and a log per model x scenario
    monkeypatch.setattr(reader, "SPOOL_ROLLOUTS", per_file)
    monkeypatch.setattr(reader, "MAX_SPOOL_FILES", max_files)
    assert _exports(sweep_catalog, tmp_path / "small", spool) == expected
    assert not any(spool.iterdir())
