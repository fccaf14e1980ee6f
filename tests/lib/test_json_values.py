"""How deep a JSON text nests, measured before it is parsed."""

from __future__ import annotations

import pytest

from eval_pipelines.lib.json_values import text_nests_deeper_than


@pytest.mark.parametrize(
    ("text", "deeper"),
    [
        ("[" * 64 + "]" * 64, False),  # exactly the limit
        ("[" * 65 + "]" * 65, True),
        ('{"a":' * 65 + "1" + "}" * 65, True),
        ("[[]]," * 1000, False),  # many brackets, none deep: more opened than the limit, depth 2
        ('["' + "[" * 1000 + '"]', False),  # brackets inside a string do not count
        ("[" * 65, True),  # malformed: measured as far as it goes
    ],
)
def test_depth_is_measured_outside_strings_up_to_the_limit(text: str, deeper: bool) -> None:
    assert text_nests_deeper_than(text, 64) is deeper
