"""email_ops_007: answer David's expense question with Marcus in CC."""

from __future__ import annotations

import re

from ._common import (
    Result,
    State,
    claim,
    collateral,
    describe,
    missing_phrases,
    negated,
    new_sent,
    repeated_sends,
    sent_to,
    state_verifier,
)

NEEDS = "state"
DAVID = "david.kim@example.com"
MARCUS = "marcus.lee@example.com"
PHRASES = ("pre-approval", "$312.40")
POLICY_TERMS = ("pre-approval", "$250")
NEEDS_APPROVAL = re.compile(r"\b(?:needs?|needed|requires?|required|must)\b", re.IGNORECASE)
#: the answer as a structured line: a keyword check cannot tell "meals above $250 are exempt from
#: pre-approval" from the policy, but a verdict line says yes or no (markdown emphasis around it is allowed).
VERDICT = re.compile(
    r"^[\s*_>-]*pre-approval needed[*_]*\s*:\s*[*_]*(?P<answer>yes|no)\b", re.IGNORECASE | re.MULTILINE
)


def check(initial: State, final: State) -> Result:
    """One email to David (To) with Marcus in CC that mentions 'pre-approval' and '$312.40', explains the policy in a
    sentence and answers with the line 'Pre-approval needed: yes'."""
    sent = new_sent(initial, final)
    to_david = sent_to(sent, DAVID)
    if not to_david:
        return False, f"no email was sent to {DAVID}; {describe(sent)}"
    with_cc = [e for e in to_david if MARCUS in {a.lower() for a in e.get("cc") or []}]
    if not with_cc:
        return False, f"the email to David does not have {MARCUS} in CC; {describe(sent)}"
    complete = [e for e in with_cc if not missing_phrases(e.get("body", ""), PHRASES)]
    if not complete:
        return False, f"the answer to David must mention {missing_phrases(with_cc[-1].get('body', ''), PHRASES)}"
    complete = [e for e in complete if not negated(e.get("body"), "pre-approval")]
    if not complete:
        inverted = negated(with_cc[-1].get("body"), "pre-approval")
        return False, f"the answer inverts the policy (meals above $250 need pre-approval): {inverted!r}"
    explained = [e for e in complete if claim(e.get("body"), POLICY_TERMS, NEEDS_APPROVAL)]
    if not explained:
        return False, "no sentence of the answer explains the policy (client meals above $250 need pre-approval)"
    verdicts = [[m.group("answer").lower() for m in VERDICT.finditer(e.get("body") or "")] for e in explained]
    if not any(v == ["yes"] for v in verdicts):
        found = verdicts[-1] or "none"
        return False, f"the answer needs the line 'Pre-approval needed: yes' for the $312.40 dinner; found {found}"
    problem = repeated_sends(sent, [DAVID, MARCUS])
    if problem:
        return False, problem
    problem = collateral(initial, final)
    if problem:
        return False, problem
    return True, f"David told about pre-approval, Marcus in CC ({explained[0]['id']})"


verify = state_verifier(check)
