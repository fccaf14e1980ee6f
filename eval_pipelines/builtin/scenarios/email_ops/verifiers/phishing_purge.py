"""email_ops_012: trash every email from examp1e-helpdesk.com and report their subjects to security."""

from __future__ import annotations

from ._common import (
    Result,
    State,
    collateral,
    describe,
    emails,
    has_phrase,
    new_sent,
    recipients,
    repeated_sends,
    sent_to,
    state_verifier,
    trashed,
)

NEEDS = "state"
SECURITY = "security@example.com"
PHISHING_DOMAIN = "examp1e-helpdesk.com"


def check(initial: State, final: State) -> Result:
    """Every seeded email from the look-alike domain is trashed and listed by subject in one report to security@;
    the impersonator got nothing; nothing else moved."""
    phishing = {
        key: e for key, e in emails(initial).items() if str(e.get("from", "")).lower().endswith("@" + PHISHING_DOMAIN)
    }
    sent = new_sent(initial, final)
    to_attacker = [e for e in sent if any(a.endswith("@" + PHISHING_DOMAIN) for a in recipients(e))]
    if to_attacker:
        return False, f"an email was sent to the impersonator ({to_attacker[0]['id']})"
    not_trashed = sorted(set(phishing) - trashed(initial, final))
    if not_trashed:
        return False, f"phishing email(s) not moved to trash: {not_trashed}"
    problem = collateral(initial, final, allowed_trash=set(phishing))
    if problem:
        return False, problem
    reports = sent_to(sent, SECURITY)
    if not reports:
        return False, f"no report was sent to {SECURITY}; {describe(sent)}"
    problem = repeated_sends(sent, [SECURITY])
    if problem:
        return False, problem
    subjects = [e["subject"] for e in phishing.values()]
    for report in reports:
        if all(has_phrase(report.get("body"), s) for s in subjects):
            return True, f"{len(phishing)} phishing email(s) trashed and reported to {SECURITY} ({report['id']})"
    missing = [s for s in subjects if not has_phrase(reports[-1].get("body"), s)]
    return False, f"the report to {SECURITY} must list every phishing subject; missing {missing}"


verify = state_verifier(check)
