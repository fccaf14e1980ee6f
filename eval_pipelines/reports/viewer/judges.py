"""The viewer's judge calibration: one sweep's `judge_calibration` read once per catalog snapshot, for the
`/judges` page, the link on the sweep's page, and the flags beside a judge's scores on a rollout's page."""

from __future__ import annotations

import threading
from typing import Any
from weakref import WeakKeyDictionary

from eval_pipelines.reports.judges import JudgeCalibration, JudgeKey, flag_text, load_judge_calibration
from eval_pipelines.reports.viewer.queries import Snapshot

_lock = threading.Lock()
#: Per snapshot (dropped with it when the catalog is rebuilt), per sweep.
_cache: WeakKeyDictionary[Snapshot, dict[str, JudgeCalibration]] = WeakKeyDictionary()


def calibration(snapshot: Snapshot, sweep_id: str) -> JudgeCalibration:
    with _lock:
        found = _cache.get(snapshot, {}).get(sweep_id)
    if found is None:
        with snapshot.cursor() as cur:
            found = load_judge_calibration(cur, sweep_id)
        with _lock:
            _cache.setdefault(snapshot, {})[sweep_id] = found
    return found


def judge_flag(flags: dict[JudgeKey, dict[str, Any]], kind: str, judge: str, judge_model: str | None) -> str:
    """What a rollout page says beside a judge's score: its flag, '' when the judge is calibrated or was never
    compared with the verifiers in this scenario."""
    row = flags.get((kind, judge, judge_model or judge))
    return flag_text(row) if row is not None else ""


def judge_anchor(kind: str, judge: str, judge_model: str | None, scenario_id: str) -> str:
    """The id of a judge's row on the `/judges` page."""
    raw = f"judge-{scenario_id}-{kind}-{judge}-{judge_model or judge}"
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in raw)
