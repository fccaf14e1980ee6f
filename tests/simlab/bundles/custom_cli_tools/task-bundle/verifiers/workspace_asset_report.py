"""workspace_report.md must carry the fixtures' figures."""

from __future__ import annotations

import re

from ._workspace import read_workspace_file

FACTS = {
    "Q4 revenue $12.5M": r"q4[^\n]*\$12\.5m",
    "18% growth": r"18%",
    "total headcount 120": r"headcount\D*120",
    "engineering 45": r"engineering\D*45",
    "sales 30": r"sales\D*30",
}


def verify(run_artifacts):
    text, problem = read_workspace_file(run_artifacts, "workspace_report.md")
    if text is None:
        return False, problem
    missing = [name for name, pattern in FACTS.items() if not re.search(pattern, text.lower())]
    if missing:
        return False, f"workspace_report.md lacks: {', '.join(missing)}"
    return True, "workspace_report.md carries the fixtures' figures"
