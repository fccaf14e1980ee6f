"""team_chat_007: get the guest Wi-Fi password from Marco on chat and email it to Dana (and nobody else)."""

from __future__ import annotations

from ._common import (
    CHAT,
    EMAIL,
    Result,
    States,
    describe_sent,
    email_collateral,
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
NPC = "marco_bianchi"
DANA = "dana.cole@northwind.example"


@state_verifier(CHAT, EMAIL)
def verify(states: States) -> Result:
    """Marco's chat reply carries the password, and one email to Dana alone carries the same password."""
    chat_initial, chat_final = states[CHAT]
    password, why = secret_obtained(chat_initial, chat_final, NPC)
    if password is None:
        return False, why
    mail_initial, mail_final = states[EMAIL]
    sent = new_sent(mail_initial, mail_final)
    to_dana = [e for e in sent if recipients(e) == {DANA} and password in text_of(e)]
    if not to_dana:
        return False, f"no email to {DANA} alone carries the guest Wi-Fi password; {describe_sent(sent)}"
    problem = repeated([e for e in sent if DANA in recipients(e)], "emails to Dana")
    if problem:
        return False, problem
    leaked = leaks(password, new_messages(chat_initial, chat_final), chat_final, sent, DANA)
    if leaked:
        return False, leaked
    problem = email_collateral(mail_initial, mail_final)
    if problem:
        return False, problem
    return True, f"Marco gave the password on chat and it was emailed to Dana ({to_dana[0].get('id')})"
