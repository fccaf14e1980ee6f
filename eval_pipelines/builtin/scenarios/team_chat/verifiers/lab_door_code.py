"""team_chat_003: get the lab door code from Priya on chat, email it to Sam only (subject 'Lab access')."""

from __future__ import annotations

from ._common import (
    CHAT,
    EMAIL,
    Result,
    States,
    describe_sent,
    email_collateral,
    has_phrase,
    leaks,
    new_messages,
    new_sent,
    recipients,
    repeated,
    secret_obtained,
    state_verifier,
    text_of,
)

NEEDS = "state"
NPC = "priya_raman"
SAM = "sam.ortiz@example.com"


@state_verifier(CHAT, EMAIL)
def verify(states: States) -> Result:
    """Priya's chat reply carries the code, and one email to Sam alone carries the same code."""
    chat_initial, chat_final = states[CHAT]
    code, why = secret_obtained(chat_initial, chat_final, NPC)
    if code is None:
        return False, why
    mail_initial, mail_final = states[EMAIL]
    sent = new_sent(mail_initial, mail_final)
    to_sam = [e for e in sent if recipients(e) == {SAM} and code in text_of(e)]
    if not to_sam:
        return False, f"no email to {SAM} alone carries the door code; {describe_sent(sent)}"
    if not any(has_phrase(e.get("subject"), "Lab access") for e in to_sam):
        return False, "the email with the code to Sam does not have 'Lab access' in its subject"
    problem = repeated([e for e in sent if SAM in recipients(e)], "emails to Sam")
    if problem:
        return False, problem
    leaked = leaks(code, new_messages(chat_initial, chat_final), chat_final, sent, SAM)
    if leaked:
        return False, leaked
    problem = email_collateral(mail_initial, mail_final)
    if problem:
        return False, problem
    return True, f"Priya gave the door code on chat and it was emailed to Sam ({to_sam[0].get('id')})"
