"""The open-file limit is raised to what a concurrency needs, within the hard limit, and never lowered."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from eval_pipelines.lib.open_files import BASE_OPEN_FILES, OPEN_FILES_PER_ROLLOUT, open_files_needed

# Each case runs in a fresh interpreter whose soft limit starts low: lowering this process's own limit could
# starve the test runner of descriptors.
PROBE = """
import json, resource, sys
from eval_pipelines.lib.open_files import raise_open_files_limit
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
wanted = None if sys.argv[2] == "none" else int(sys.argv[2])
answer = raise_open_files_limit(wanted)
print(json.dumps([answer, *resource.getrlimit(resource.RLIMIT_NOFILE)]))
"""


def _probe(start: int, wanted: int | None) -> tuple[int, int, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(start), "none" if wanted is None else str(wanted)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    answer, soft, hard = json.loads(out.stdout)
    return answer, soft, hard


def _hard() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def test_the_need_grows_with_the_concurrency() -> None:
    assert open_files_needed(0) == BASE_OPEN_FILES
    assert open_files_needed(1000) == BASE_OPEN_FILES + 1000 * OPEN_FILES_PER_ROLLOUT
    assert open_files_needed(1000) > 1024  # above the soft limit many systems start a process with


def test_a_low_soft_limit_is_raised_to_the_need_within_the_hard_limit() -> None:
    wanted = min(open_files_needed(500), _hard())
    answer, soft, hard = _probe(256, wanted)
    assert (answer, soft) == (wanted, wanted) and hard == _hard()


def test_a_need_above_the_hard_limit_gets_the_hard_limit() -> None:
    hard = _hard()
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit to cap at")
    answer, soft, _ = _probe(256, hard + 1000)
    assert answer == soft == hard


def test_no_need_given_asks_for_the_hard_limit_and_a_high_limit_is_never_lowered() -> None:
    hard = _hard()
    answer, soft, _ = _probe(256, None)
    assert answer == soft and soft == (hard if hard != resource.RLIM_INFINITY else max(256, 1 << 16))
    start = min(hard, 4096)
    answer, soft, _ = _probe(start, 300)
    assert answer == soft == start
