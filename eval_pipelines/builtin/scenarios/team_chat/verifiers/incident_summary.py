"""team_chat_005: email Aiko a summary of the latest incident (INC-5531) with its mitigation time."""

from __future__ import annotations

import re

from ._common import (
    EMAIL,
    Result,
    States,
    claim,
    describe_sent,
    email_collateral,
    has_phrase,
    new_sent,
    recipients,
    repeated,
    state_verifier,
)

NEEDS = "state"
AIKO = "aiko.tanaka@example.com"
LATEST = "INC-5531"
OLDER = "INC-5529"
MITIGATED = re.compile(r"\b(?:mitigat\w*|resolved|fixed|rolled back|recovered)\b", re.IGNORECASE)


@state_verifier(EMAIL)
def verify(states: States) -> Result:
    """One email to Aiko whose subject names INC-5531 and whose body says in a sentence that it was mitigated
    at 10:42."""
    initial, final = states[EMAIL]
    sent = new_sent(initial, final)
    to_aiko = [e for e in sent if AIKO in recipients(e)]
    if not to_aiko:
        return False, f"no email was sent to {AIKO}; {describe_sent(sent)}"
    about_latest = [e for e in to_aiko if has_phrase(e.get("subject"), LATEST)]
    if not about_latest:
        if any(has_phrase(e.get("subject"), OLDER) for e in to_aiko):
            return False, f"the summary is about the older {OLDER}, not the latest incident {LATEST}"
        return False, f"no email to Aiko names {LATEST} in its subject"
    if not any(has_phrase(e.get("body"), "10:42") for e in about_latest):
        return False, "the summary does not say when the incident was mitigated (10:42)"
    if not any(claim(e.get("body"), ("10:42",), MITIGATED) for e in about_latest):
        return False, "no sentence of the summary says that the incident was mitigated at 10:42"
    problem = repeated(to_aiko, "emails to Aiko")
    if problem:
        return False, problem
    problem = email_collateral(initial, final)
    if problem:
        return False, problem
    return True, f"{LATEST} summary emailed to Aiko ({about_latest[0].get('id')})"
