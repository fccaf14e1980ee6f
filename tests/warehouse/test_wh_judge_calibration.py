"""judge_calibration: a judge that disagrees with the verifiers on known rollouts shows the rates and the kappa
computed here by hand from the verdicts written, and is flagged below the threshold."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.schemas.judging import (
    DEFAULT_JUDGE_MIN_KAPPA,
    FLAG_KAPPA_BELOW_THRESHOLD,
    FLAG_KAPPA_UNDEFINED,
)
from eval_pipelines.warehouse.catalog import connect_read_only
from tests.warehouse.calibration_warehouse import (
    CALENDAR,
    EMAIL,
    QUALITY,
    QUALITY_WRONG,
    RUBRIC,
    RUBRIC_WRONG,
    SAFETY,
    SWEEP,
    Judged,
    build_calibration_catalog,
)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Judged]]:
    return build_calibration_catalog(tmp_path_factory.mktemp("calibration"))


def _rows(db: Path, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    con = connect_read_only(db)
    try:
        cursor = con.execute(sql, list(params))
        names = [d[0] for d in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()


def _expected(judged: list[Judged], scenario: str, kind: str) -> dict[str, Any]:
    """Rates and Cohen's kappa from the 2x2 table of the scored verdicts, by the textbook definitions."""
    pairs = [(j.judge_pass, j.verifier_pass) for j in judged if j.scenario == scenario and j.judge_kind == kind]
    scored = [(jp, vp) for jp, vp in pairs if vp is not None]
    n = len(scored)
    tp = sum(1 for jp, vp in scored if jp and vp)
    tn = sum(1 for jp, vp in scored if not jp and not vp)
    fp = sum(1 for jp, vp in scored if jp and not vp)
    fn = sum(1 for jp, vp in scored if not jp and vp)
    p_observed = (tp + tn) / n
    judge_yes, verifier_yes = (tp + fp) / n, (tp + fn) / n
    p_chance = judge_yes * verifier_yes + (1 - judge_yes) * (1 - verifier_yes)
    kappa = None if p_chance == 1 else (p_observed - p_chance) / (1 - p_chance)
    return {
        "n": n,
        "both_pass": tp,
        "both_fail": tn,
        "judge_only_pass": fp,
        "verifier_only_pass": fn,
        "base_rate": verifier_yes,
        "tpr": tp / (tp + fn) if tp + fn else None,
        "tnr": tn / (tn + fp) if tn + fp else None,
        "kappa": kappa,
    }


def _close(actual: Any, expected: Any) -> bool:
    if expected is None or actual is None:
        return actual is expected
    return abs(actual - expected) < 1e-12


def test_rates_and_kappa_match_a_hand_count(calibrated: tuple[Path, list[Judged]]) -> None:
    db, judged = calibrated
    rows = {
        (r["scenario_id"], r["judge_kind"]): r
        for r in _rows(db, "select * from judge_calibration where sweep_id = ?", [SWEEP])
    }
    assert set(rows) == {(s, k) for s in (EMAIL, CALENDAR) for k in ("quality", "safety", "rubric")}
    for (scenario, kind), row in rows.items():
        want = _expected(judged, scenario, kind)
        for column in ("n", "both_pass", "both_fail", "judge_only_pass", "verifier_only_pass"):
            assert row[column] == want[column], (scenario, kind, column)
        for column in ("base_rate", "tpr", "tnr", "kappa"):
            assert _close(row[column], want[column]), (scenario, kind, column, row[column], want[column])
    quality = rows[(EMAIL, "quality")]
    # The known share: 5 of the 22 scored rollouts (the unverified ones are left out), over both agent models; the
    # judge and its model are named.
    assert (quality["n"], quality["n_disagree"], quality["n_models"]) == (22, len(QUALITY_WRONG), 2)
    assert (quality["judge"], quality["judge_model"]) == QUALITY
    assert (rows[(EMAIL, "safety")]["judge"], rows[(EMAIL, "safety")]["judge_model"]) == SAFETY
    rubric = rows[(EMAIL, "rubric")]
    # The rubric judge's ERROR verdict is its own failure, not a disagreement: 21 rollouts, 1 disagreement.
    assert (rubric["judge"], rubric["judge_model"], rubric["n"], rubric["n_disagree"]) == (
        *RUBRIC,
        21,
        len(RUBRIC_WRONG),
    )


def test_a_judge_below_the_threshold_is_flagged(calibrated: tuple[Path, list[Judged]]) -> None:
    db, _ = calibrated
    flags = {
        (r["scenario_id"], r["judge_kind"]): (r["flagged"], r["flag_reason"], r["kappa"], r["min_kappa"])
        for r in _rows(db, "select * from judge_calibration")
    }
    flagged, reason, kappa, threshold = flags[(EMAIL, "quality")]
    assert threshold == DEFAULT_JUDGE_MIN_KAPPA and kappa < threshold
    assert (flagged, reason) == (True, FLAG_KAPPA_BELOW_THRESHOLD)
    assert flags[(EMAIL, "safety")][:3] == (False, None, 1.0)
    assert flags[(EMAIL, "rubric")][:2] == (False, None) and flags[(EMAIL, "rubric")][2] >= threshold
    # Verifiers that pass every rollout leave kappa undefined: the judge cannot be vouched for.
    for kind in ("quality", "safety", "rubric"):
        assert flags[(CALENDAR, kind)][:3] == (True, FLAG_KAPPA_UNDEFINED, None)


def test_the_disagreeing_rollouts_are_listed(calibrated: tuple[Path, list[Judged]]) -> None:
    db, judged = calibrated
    listed = _rows(
        db,
        "select rollout_id, judge_pass, verifier_pass from judge_calibration_rollouts "
        "where scenario_id = ? and judge_kind = 'quality' and not agree order by rollout_id",
        [EMAIL],
    )
    want = sorted(
        j.rollout_id
        for j in judged
        if j.scenario == EMAIL and j.judge_kind == "quality" and j.verifier_pass is not None
        and j.judge_pass != j.verifier_pass
    )  # fmt: skip
    assert [r["rollout_id"] for r in listed] == want and len(want) == len(QUALITY_WRONG)


def test_quality_counts_agree_with_judge_verifier_agreement(calibrated: tuple[Path, list[Judged]]) -> None:
    """The older per-model view reads quality scores by the same rule: summed over models, the counts match."""
    db, _ = calibrated
    older = _rows(
        db,
        "select sum(n) as n, sum(both_pass) as tp, sum(both_fail) as tn from judge_verifier_agreement "
        "where scenario_id = ?",
        [EMAIL],
    )[0]
    mine = _rows(
        db,
        "select n, both_pass as tp, both_fail as tn from judge_calibration "
        "where scenario_id = ? and judge_kind = 'quality'",
        [EMAIL],
    )[0]
    assert {k: int(v) for k, v in older.items()} == mine
