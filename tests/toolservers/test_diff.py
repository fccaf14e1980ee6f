"""diff_states: a pure function, tested directly."""

from __future__ import annotations

import copy

import pytest

from eval_pipelines.schemas.tools import DiffScope
from eval_pipelines.toolservers import EmailServer, State, diff_states


def _mail(folder: str = "inbox", subject: str = "s") -> dict[str, object]:
    return {"id": "x", "subject": subject, "folder": folder, "to": ["a@b.com"]}


@pytest.fixture
def base() -> State:
    return {
        "emails": {"e-1": _mail(), "e-2": _mail(subject="two"), "e-3": _mail(subject="three")},
        "contacts": {"a@b.com": {"email": "a@b.com", "name": "A", "title": ""}},
    }


def test_identical_states_give_an_empty_diff(base: State) -> None:
    diff = diff_states(EmailServer(), base, copy.deepcopy(base), DiffScope.FULL)
    assert diff.summary == "no changes" and diff.is_empty
    assert diff.before == {} and diff.after == {}
    assert diff.tool_server == "email" and diff.scope == DiffScope.FULL


def test_added_changed_removed_are_split_and_summarised(base: State) -> None:
    after = copy.deepcopy(base)
    after["emails"]["sent-0001"] = _mail("sent", "new")
    after["emails"]["e-1"]["folder"] = "trash"
    after["emails"]["e-2"]["to"].append("c@d.com")  # nested change counts
    del after["emails"]["e-3"]
    diff = diff_states(EmailServer, base, after, "tool_call", step_index=4, tool_name="send_email")
    assert diff.summary == "+1 email(s) added; ~2 email(s) changed; -1 email(s) removed"
    assert set(diff.after["emails"]) == {"sent-0001", "e-1", "e-2"}
    assert set(diff.before["emails"]) == {"e-1", "e-2", "e-3"}
    assert diff.before["emails"]["e-1"]["folder"] == "inbox" and diff.after["emails"]["e-1"]["folder"] == "trash"
    assert "contacts" not in diff.before and "contacts" not in diff.after
    assert (diff.scope, diff.step_index, diff.tool_name) == (DiffScope.TOOL_CALL, 4, "send_email")


def test_several_collections_and_default_nouns(base: State) -> None:
    after = copy.deepcopy(base)
    after["contacts"]["z@y.com"] = {"email": "z@y.com", "name": "Z", "title": ""}
    after["labels"] = {"l-1": {"name": "urgent"}}
    del after["emails"]["e-1"]
    diff = diff_states(EmailServer(), base, after, DiffScope.FULL)
    assert diff.summary == "-1 email(s) removed; +1 contact(s) added; +1 labels added"
    builtin_by_name = diff_states("email", base, after, DiffScope.FULL)
    assert builtin_by_name.summary == diff.summary
    # An unregistered server name falls back to the collection's own name as its noun.
    by_name = diff_states("unregistered", {"events": {}}, {"events": {"ev-1": {"title": "x"}}}, DiffScope.FULL)
    assert by_name.tool_server == "unregistered" and by_name.summary == "+1 events added"
    calendar = diff_states("calendar", {"events": {}}, {"events": {"ev-1": {"title": "x"}}}, DiffScope.FULL)
    assert calendar.summary == "+1 calendar event(s) added"


def test_a_collection_missing_on_one_side(base: State) -> None:
    after = copy.deepcopy(base)
    del after["contacts"]
    diff = diff_states(EmailServer(), base, after, DiffScope.FULL)
    assert diff.summary == "-1 contact(s) removed"
    assert diff.before == {"contacts": {"a@b.com": base["contacts"]["a@b.com"]}} and diff.after == {}
    grown = diff_states(EmailServer(), {}, base, DiffScope.FULL)
    assert grown.summary == "+3 email(s) added; +1 contact(s) added"


def test_diff_copies_changed_items_and_never_aliases_inputs(base: State) -> None:
    after = copy.deepcopy(base)
    after["emails"]["e-1"]["folder"] = "trash"
    diff = diff_states(EmailServer(), base, after, DiffScope.TOOL_CALL)
    diff.after["emails"]["e-1"]["folder"] = "mutated"
    diff.before["emails"]["e-1"]["folder"] = "mutated"
    assert after["emails"]["e-1"]["folder"] == "trash" and base["emails"]["e-1"]["folder"] == "inbox"


def test_diff_of_a_large_mostly_unchanged_state_is_fast() -> None:
    import time

    before: State = {
        "emails": {f"e-{i}": {"id": f"e-{i}", "body": "x" * 200, "to": ["a@b.com"]} for i in range(20_000)}
    }
    after = {"emails": dict(before["emails"])}
    after["emails"]["e-5"] = {**before["emails"]["e-5"], "body": "changed"}
    start = time.perf_counter()
    diff = diff_states(EmailServer(), before, after, DiffScope.FULL)
    assert time.perf_counter() - start < 0.5
    assert diff.summary == "~1 email(s) changed"
