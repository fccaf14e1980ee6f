"""office_ops_010: config/app.ini's timezone fixed to Europe/Berlin, every other line and file kept."""

from __future__ import annotations

from ._common import Pair, Result, collateral, file_text, state_verifier

NEEDS = "state"
CONFIG = "config/app.ini"
SCRIPT = "scripts/check_config.sh"


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def check(files: Pair) -> Result:
    """The config equals the seeded one with only the timezone line corrected; the check script and every
    other seeded file are untouched."""
    seeded = file_text(files[0], CONFIG)
    if seeded is None or file_text(files[0], SCRIPT) is None:
        return False, f"{CONFIG} or {SCRIPT} is not in the seeded workspace state"
    now = file_text(files[1], CONFIG)
    if now is None:
        return False, f"{CONFIG} is missing"
    expected = [
        "timezone = Europe/Berlin" if line.replace(" ", "").startswith("timezone=") else line for line in _lines(seeded)
    ]
    actual = [line.replace(" = ", "=").replace("=", " = ") for line in _lines(now)]
    if actual == _lines(seeded):
        return False, f"{CONFIG} still has the wrong timezone"
    if actual != expected:
        return False, f"{CONFIG} should differ from the seeded file only in the timezone line; got {actual}"
    problem = collateral(files, "files", "file", allowed={CONFIG})
    if problem:
        return False, problem
    return True, f"{CONFIG} now says timezone = Europe/Berlin and nothing else changed"


verify = state_verifier("files")(check)
