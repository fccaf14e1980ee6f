"""A final answer that is a tool call written as text is flagged; prose and other JSON are not."""

from __future__ import annotations

import pytest

from eval_pipelines.agents.text_tool_calls import flag_text_tool_call, looks_like_tool_call
from eval_pipelines.schemas.artifacts import META_TEXT_TOOL_CALL, RunArtifacts

CALLS = {
    "bare": '{"name": "email__send_email", "arguments": {"to": "a@example.com"}}',
    "parameters_key": '{"name": "send_email", "parameters": {"to": "a@example.com"}}',
    "list": '[{"name": "email__list_emails", "arguments": {}}, {"name": "email__read_email", "arguments": {"id": 1}}]',
    "fenced_json": '```json\n{"name": "email__send_email", "arguments": {"to": "a@example.com"}}\n```',
    "fenced_plain": '```\n{"name": "email__send_email", "arguments": {}}\n```',
    "hermes_tags": '<tool_call>\n{"name": "email__send_email", "arguments": {"to": "a@example.com"}}\n</tool_call>',
    "two_tags": '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
    '<tool_call>{"name": "b", "arguments": {}}</tool_call>',
    "openai_shape": '{"type": "function", "function": {"name": "email__send_email", "arguments": "{}"}}',
}
NOT_CALLS = {
    "prose": "I sent the email to Aisha and archived the promotion.",
    "mentions_a_tool": "I used email__send_email with the arguments you gave me; it worked.",
    "json_without_a_call": '{"status": "done", "emails_sent": 1}',
    "name_without_arguments": '{"name": "Aisha Okafor"}',
    "prose_then_json": 'Done. Here is the call I made: {"name": "email__send_email", "arguments": {}}',
    "empty": "",
    "broken_tag": "<tool_call>not json</tool_call>",
}


@pytest.mark.parametrize("text", CALLS.values(), ids=CALLS.keys())
def test_tool_calls_written_as_text_are_recognised(text: str) -> None:
    assert looks_like_tool_call(text)


@pytest.mark.parametrize("text", NOT_CALLS.values(), ids=NOT_CALLS.keys())
def test_answers_are_not_mistaken_for_tool_calls(text: str) -> None:
    assert not looks_like_tool_call(text)


def test_the_flag_lands_on_the_artifacts() -> None:
    flagged = RunArtifacts(task_id="t", task="x", final_observation=CALLS["hermes_tags"])
    plain = RunArtifacts(task_id="t", task="x", final_observation=NOT_CALLS["prose"])
    assert flag_text_tool_call(flagged) and flagged.metadata[META_TEXT_TOOL_CALL] is True
    assert not flag_text_tool_call(plain) and plain.metadata[META_TEXT_TOOL_CALL] is False
