"""Request handling: field-named errors (num_tasks 0/201 included), presets, defaults, the complexity mix
(largest remainder) and the diversity object."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from eval_pipelines.schemas.taskgen import DEFAULT_AGENT_EMAIL, DEFAULT_EMAIL_DOMAIN, Workflow
from eval_pipelines.taskgen import (
    PRESETS,
    SchemaTaskGenerator,
    TaskGenFailed,
    TaskGenRequestError,
    apportion,
    generate_scenario,
    parse_request,
    resolve_request,
)
from tests.service.eval_service_support import WRITE_KEY, running_service
from tests.taskgen.conftest import calendar_toolset


def _body(**fields: object) -> dict[str, object]:
    return {"toolset": calendar_toolset(), **fields}


@pytest.mark.parametrize("num_tasks", [0, 201])
def test_num_tasks_out_of_range_is_rejected_naming_the_field(num_tasks: int, tmp_path: Path) -> None:
    with pytest.raises(TaskGenRequestError) as error:
        parse_request(_body(num_tasks=num_tasks))
    assert error.value.field == "num_tasks" and str(error.value).startswith("num_tasks: ")
    with pytest.raises(TaskGenRequestError) as again:
        asyncio.run(generate_scenario(_body(num_tasks=num_tasks), tmp_path, "never_written"))
    assert again.value.field == "num_tasks"
    assert not (tmp_path / "never_written").exists()


@pytest.mark.parametrize("num_tasks", [0, 201])
def test_the_service_rejects_num_tasks_out_of_range_with_a_field_named_422(num_tasks: int, tmp_path: Path) -> None:
    with running_service(tmp_path, task_generator=SchemaTaskGenerator()) as running:
        response = httpx.post(
            f"{running.url}/v1/task-gen", json=_body(num_tasks=num_tasks), headers={"API-Key": WRITE_KEY}
        )
    assert response.status_code == 422
    assert any("num_tasks" in item["loc"] for item in response.json()["detail"])


def test_defaults_follow_the_spec() -> None:
    resolved = resolve_request(_body())
    assert resolved.num_tasks == 10
    assert resolved.workspace.email_domain == DEFAULT_EMAIL_DOMAIN == "example.com"
    assert resolved.workspace.agent_email == DEFAULT_AGENT_EMAIL == "agent@example.com"
    assert resolved.counts == {"easy": 3, "medium": 5, "hard": 2}
    assert resolved.diversity.seed == 0 and set(resolved.diversity.vary) == {"parameters", "phrasing", "entities"}


@pytest.mark.parametrize(
    ("total", "shares", "expected"),
    [
        (20, {"easy": 0.25, "medium": 0.45, "hard": 0.30}, {"easy": 5, "medium": 9, "hard": 6}),
        (7, {"easy": 1, "medium": 1, "hard": 1}, {"easy": 3, "medium": 2, "hard": 2}),
        (10, {"easy": 0.3, "medium": 0.5, "hard": 0.2}, {"easy": 3, "medium": 5, "hard": 2}),
        (3, {"easy": 0, "medium": 2, "hard": 1}, {"easy": 0, "medium": 2, "hard": 1}),
        (1, {"easy": 0.1, "medium": 0.2, "hard": 0.7}, {"easy": 0, "medium": 0, "hard": 1}),
    ],
)
def test_complexity_mix_uses_largest_remainder(total: int, shares: dict[str, float], expected: dict[str, int]) -> None:
    assert apportion(total, shares) == expected
    assert resolve_request(_body(num_tasks=total, complexity=shares)).counts == expected


def test_apportion_always_sums_to_the_total_within_rounding() -> None:
    shares = {"easy": 0.17, "medium": 0.61, "hard": 0.22}
    for total in range(1, 201):
        counts = apportion(total, shares)
        assert sum(counts.values()) == total
        assert all(abs(counts[k] - total * v) < 1 for k, v in shares.items())


def test_shares_near_the_float_limit_are_apportioned_not_overflowed() -> None:
    """A request may send `complexity: {"hard": 1.2e308}`: an overflow to infinity was a 500."""
    assert apportion(57, {"hard": 1.2329189407079013e308}) == {"hard": 57}
    assert apportion(4, {"easy": 1.5e308, "hard": 1.5e308}) == {"easy": 2, "hard": 2}  # their sum is infinite
    assert resolve_request(_body(num_tasks=3, complexity={"hard": 1.2e308})).counts["hard"] == 3
    with pytest.raises(ValueError, match="finite"):
        apportion(3, {"easy": float("inf")})


def test_presets_fill_agent_scenario_and_workflows_and_request_fields_win() -> None:
    assert len(PRESETS) >= 2
    for name, preset in PRESETS.items():
        resolved = resolve_request(_body(preset=name))
        assert resolved.agent == preset.agent and resolved.agent.role
        assert resolved.scenario == preset.scenario and resolved.scenario.policies
        assert resolved.workflows == preset.workflows and resolved.workflows
    own = resolve_request(
        _body(preset="office_assistant", workflows=[{"name": "mine", "steps": ["create it"]}], agent={"role": "x"})
    )
    assert own.workflows == [Workflow(name="mine", steps=["create it"])]
    assert own.agent.role == "x" and own.scenario == PRESETS["office_assistant"].scenario


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"preset": "no_such_preset"}, "preset"),
        ({"diversity": {"max_similar": 2}}, "diversity.max_similar"),
        ({"diversity": {"vary": ["colours"]}}, "diversity.vary.0"),
        ({"diversity": {"surprise": True}}, "diversity.surprise"),
        ({"complexity": {"easy": 0, "medium": 0, "hard": 0}}, "complexity"),
        ({"complexity": {"easy": -1}}, "complexity.easy"),
    ],
)
def test_bad_fields_are_named(fields: dict[str, object], field: str) -> None:
    with pytest.raises(TaskGenRequestError) as error:
        resolve_request(_body(**fields))
    assert error.value.field == field


def test_a_generator_fails_the_job_naming_the_field() -> None:
    request = parse_request(_body(preset="no_such_preset"))
    with pytest.raises(TaskGenFailed, match=r"^preset: unknown preset 'no_such_preset'"):
        asyncio.run(SchemaTaskGenerator().generate(request, lambda _text: None))
