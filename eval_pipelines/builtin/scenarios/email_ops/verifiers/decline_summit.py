"""email_ops_010: decline the Logistics Summit invitation and tell Priya."""

from __future__ import annotations

import re

from ._common import (
    Result,
    State,
    claim,
    collateral,
    describe,
    has_phrase,
    negated,
    new_sent,
    repeated_sends,
    sent_to,
    state_verifier,
    text_of,
)

NEEDS = "state"
ORGANISERS = "events@logisticsummit.org"
PRIYA = "priya.shah@example.com"
DECLINING = re.compile(r"\bdeclin", re.IGNORECASE)


def _accepts(body: object) -> bool:
    """Accepting (or agreeing to speak) contradicts declining, whatever other words the email uses."""
    return any(
        has_phrase(body, phrase) and not negated(body, phrase)
        for phrase in ("accept", "happy to speak", "glad to speak", "will send a speaker", "we'll send a speaker")
    )


def check(initial: State, final: State) -> Result:
    """One declining email to the organisers ('decline' in a sentence) and one email to Priya saying the
    'Logistics Summit' invitation was declined."""
    sent = new_sent(initial, final)
    to_organisers = sent_to(sent, ORGANISERS)
    if not to_organisers:
        return False, f"no reply was sent to {ORGANISERS}; {describe(sent)}"
    if not any(has_phrase(e.get("body"), "decline") for e in to_organisers):
        return False, "the email to the organisers does not contain 'decline'"
    declining = [e for e in to_organisers if not negated(e.get("body"), "decline") and not _accepts(e.get("body"))]
    if not declining:
        return False, "the email to the organisers says 'decline' but does not decline the invitation"
    if not any(claim(e.get("body"), ("decline",), DECLINING) for e in declining):
        return False, "no sentence of the email to the organisers declines the invitation"
    to_priya = sent_to(sent, PRIYA)
    if not to_priya:
        return False, f"Priya ({PRIYA}) was not told that the invitation was declined; {describe(sent)}"
    if not any(has_phrase(text_of(e), "Logistics Summit") for e in to_priya):
        return False, "the email to Priya does not mention 'Logistics Summit'"
    if not any(claim(text_of(e), ("Logistics Summit",), DECLINING) and not _accepts(e.get("body")) for e in to_priya):
        return False, "the email to Priya does not say that the Logistics Summit invitation was declined"
    problem = repeated_sends(sent, [ORGANISERS, PRIYA])
    if problem:
        return False, problem
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, "invitation declined and Priya informed"


verify = state_verifier(check)
