"""office_ops_008: reports/urgent_open.md lists exactly the unresolved high/urgent tickets."""

from __future__ import annotations

import re

from ._common import Pair, Result, collateral, file_text, items, state_verifier

NEEDS = "state"
REPORT = "reports/urgent_open.md"
_TICKET_ID = re.compile(r"\bTKT-\d+\b", re.I)


def check(records: Pair, files: Pair) -> Result:
    """The report names every ticket that is open or in progress with priority high or urgent (computed from
    the seeded tickets), each once, and no other; tickets and existing files untouched."""
    expected = {
        key
        for key, t in items(records[0], "tickets").items()
        if t.get("status") in {"open", "in_progress"} and t.get("priority") in {"high", "urgent"}
    }
    if not expected:
        return False, "the seeded helpdesk state has no unresolved high/urgent tickets"
    text = file_text(files[1], REPORT)
    if text is None:
        return False, f"{REPORT} was not written"
    mentions = [m.upper() for m in _TICKET_ID.findall(text)]
    listed = set(mentions)
    twice = sorted({key for key in listed if mentions.count(key) > 1})
    if twice:
        return False, f"{REPORT} lists {twice} more than once; one line per ticket"
    if listed - expected:
        return (
            False,
            f"{REPORT} lists tickets that are resolved, closed or not high/urgent: {sorted(listed - expected)}",
        )
    if expected - listed:
        return False, f"{REPORT} misses {sorted(expected - listed)}"
    problem = collateral(records, "tickets", "ticket") or collateral(files, "files", "file")
    if problem:
        return False, problem
    return True, f"{REPORT} lists exactly {sorted(expected)}"


verify = state_verifier("records", "files")(check)
