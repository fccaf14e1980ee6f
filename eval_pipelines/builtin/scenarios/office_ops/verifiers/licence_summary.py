"""office_ops_003: reports/licence_summary.txt with each vendor's monthly total and the overall TOTAL."""

from __future__ import annotations

import csv
import io
import re

from ._common import Pair, Result, collateral, file_text, norm, state_verifier

NEEDS = "state"
SOURCE = "data/licences.csv"
REPORT = "reports/licence_summary.txt"
_LINE = re.compile(r"^\s*[-*]?\s*(?P<name>[^:]+?)\s*:\s*\$?\s*(?P<amount>[\d,]+(?:\.\d+)?)\s*(?:usd)?\s*$", re.I)


def expected_totals(csv_text: str) -> dict[str, int]:
    """Vendor -> seats x cost per seat, computed from the seeded CSV (so the verifier follows the data)."""
    return {
        norm(row["vendor"]): int(row["seats"]) * int(row["cost_per_seat_usd"])
        for row in csv.DictReader(io.StringIO(csv_text))
    }


def reported(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            found[norm(match.group("name"))] = float(match.group("amount").replace(",", ""))
    return found


def check(files: Pair) -> Result:
    """Every vendor's total and the TOTAL line match the seeded CSV, each on one line; the CSV is untouched."""
    source = file_text(files[0], SOURCE)
    if source is None:
        return False, f"{SOURCE} is not in the seeded workspace state"
    expected = expected_totals(source)
    text = file_text(files[1], REPORT)
    if text is None:
        return False, f"{REPORT} was not written"
    lines = reported(text)
    for vendor, total in expected.items():
        if lines.get(vendor) != total:
            return False, f"{REPORT}: the total for {vendor!r} is {lines.get(vendor)}, expected {total}"
    names = [norm(m.group("name")) for line in text.splitlines() if (m := _LINE.match(line))]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        return False, f"{REPORT} has more than one line for {twice}; the report lists each once"
    grand = sum(expected.values())
    if lines.get("total") != grand:
        return False, f"{REPORT}: TOTAL is {lines.get('total')}, expected {grand}"
    problem = collateral(files, "files", "file")
    if problem:
        return False, problem
    return True, f"{REPORT} lists all {len(expected)} vendor totals and TOTAL {grand}"


verify = state_verifier("files")(check)
