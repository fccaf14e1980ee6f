"""office_ops_006: email the vendor demo's attendees about its clash with the all-hands; calendar unchanged."""

from __future__ import annotations

from ._common import (
    ACCOUNT,
    Pair,
    Result,
    describe_sent,
    has_phrase,
    items,
    mailbox_collateral,
    missing_phrases,
    new_sent,
    norm,
    proposes,
    recipients,
    repeated,
    state_verifier,
)

NEEDS = "state"
DEMO = "evt-0102"
PHRASES = ("all-hands", "Thursday", "11:00")


def check(calendar: Pair, mailbox: Pair) -> Result:
    """One email to exactly the demo's attendees (other than the agent), naming the demo in the subject,
    mentioning the all-hands and proposing Thursday 11:00 (not announcing it);
    no email to anyone else; calendar untouched."""
    demo = items(calendar[0], "events").get(DEMO)
    if demo is None:
        return False, f"{DEMO} is not in the seeded calendar state"
    attendees = {norm(a) for a in demo.get("attendees") or []} - {ACCOUNT}
    sent = new_sent(mailbox)
    to_them = [e for e in sent if recipients(e) == attendees]
    if not to_them:
        return False, f"no email went to exactly the demo's attendees {sorted(attendees)}; {describe_sent(sent)}"
    strays = [e for e in sent if e not in to_them]
    if strays:
        return False, f"emails also went to others: {describe_sent(strays)}"
    good = [
        e
        for e in to_them
        if has_phrase(e.get("subject"), "vendor demo")
        and not missing_phrases(f"{e.get('subject')}\n{e.get('body')}", PHRASES)
    ]
    if not good:
        email = to_them[-1]
        missing = missing_phrases(f"{email.get('subject')}\n{email.get('body')}", PHRASES)
        if not has_phrase(email.get("subject"), "vendor demo"):
            missing = ["'Vendor demo' in the subject", *missing]
        return False, f"the email to the demo's attendees lacks {missing}"
    if not any(proposes(e.get("body"), ("Thursday", "11:00")) for e in good):
        return False, "the email announces the move instead of proposing Thursday 11:00 (a question or a proposal)"
    problem = repeated(to_them, "emails to the demo's attendees")
    if problem:
        return False, problem
    if calendar[1] != calendar[0]:
        return False, "the calendar was changed, but the task said to leave it unchanged"
    problem = mailbox_collateral(mailbox)
    if problem:
        return False, problem
    return True, "the vendor demo's attendees were told about the clash and offered Thursday 11:00"


verify = state_verifier("calendar", "email")(check)
