"""Scenarios (templates): tasks, rubrics, NPCs, seed data files and the verifier bundle."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from eval_pipelines.inputs.hosted import is_listed, scenario_guidance, served_task, served_template, task_is_listed
from eval_pipelines.inputs.scenarios import ScenarioError
from eval_pipelines.schemas.scenarios import Rubric, SeedDataFile, Template
from eval_pipelines.schemas.service_wire import (
    ScenarioNpcs,
    ScenarioTasks,
    SeedDataList,
)
from eval_pipelines.service.executor import InvalidRequest, NotFound
from eval_pipelines.service.responses import (
    NOT_FOUND,
    error_doc,
    error_response,
)
from eval_pipelines.service.routes.workspaces import listing_urls
from eval_pipelines.service.state import ServiceDep
from eval_pipelines.verifiers.bundle import BundleError, build_bundle, family_of_package

logger = logging.getLogger(__name__)

router = APIRouter()

ScenarioId = Annotated[str, Path(description="template id, e.g. `email_ops:1.0.0`")]
SeedFilename = Annotated[str, Path(description="a relative path inside the seed data directory")]
IncludeHidden = Annotated[bool, Query(description="also list what is `visibility: hidden`")]
IncludeTest = Annotated[bool, Query(description="also list tasks of category `test` (the hosted product's flag)")]


# -- scenarios -------------------------------------------------------------------------------------
@router.get("/scenarios", response_model=list[Template], tags=["scenarios"], summary="List templates")
def list_scenarios(service: ServiceDep, include_hidden: IncludeHidden = False) -> list[Template]:
    service.catalog.refresh()  # scenarios written since startup (generated ones) show up
    templates = []
    for scenario in service.catalog.all():
        if not is_listed(scenario.template.visibility, include_hidden=include_hidden):
            continue
        try:
            # An imported scenario under its bundle's server names: SimLab's `env init` picks toolsets by them,
            # and copies the guidance into the environment it makes.
            template = served_template(scenario.with_counts(), scenario.tasks().values())
            guidance = scenario_guidance(scenario.root, scenario.template)
            templates.append(template.model_copy(update={"scenario_guidance_md": guidance}))
        except ScenarioError as exc:  # one broken scenario folder must not hide all the others
            logger.error("scenario %s is left out of the listing: %s", scenario.scenario_id, exc)
    return templates


@router.get(
    "/scenarios/{scenario_id}/tasks",
    response_model=ScenarioTasks,
    tags=["scenarios"],
    responses=NOT_FOUND,
    summary="Tasks of a template",
)
def list_tasks(
    request: Request,
    service: ServiceDep,
    scenario_id: ScenarioId,
    include_hidden: IncludeHidden = False,
    include_test: IncludeTest = True,
) -> ScenarioTasks:
    """Each task's `tool_server_url`s are this listing's own: the first call to one makes a workspace seeded with
    the task's seed files, which no other listing's URL reaches (`service/caller_workspaces.py`). Test tasks
    are listed unless `include_test=false` (SimLab's `tasks list` without `--include-test` sends that)."""
    scenario = service.scenario(scenario_id)
    token = service.caller_workspaces.mint(scenario.scenario_id)
    # the tool host this service runs rollouts against, with the scenario's simulated servers under their names
    hosted = set(scenario.tool_server_urls(service.runtime.tool_server_urls()))
    tasks = [
        served_task(scenario.public_task(task), task, listing_urls(request, token, task, hosted))
        for task in scenario.tasks().values()
        if task_is_listed(task, include_hidden=include_hidden, include_test=include_test)
    ]
    return ScenarioTasks(scenario_id=scenario.scenario_id, tasks=tasks)


@router.get(
    "/scenarios/{scenario_id}/tasks/{task_id}/rubric",
    response_model=Rubric,
    tags=["scenarios"],
    responses=NOT_FOUND,
    summary="Rubric of a task",
)
def get_rubric(service: ServiceDep, scenario_id: ScenarioId, task_id: str) -> Rubric:
    scenario = service.scenario(scenario_id)
    task = scenario.tasks().get(task_id)
    if task is None:
        raise NotFound(f"task {task_id!r} not found in scenario {scenario.scenario_id!r}")
    if task.rubric is None:
        raise NotFound(f"task {task_id!r} has no rubric")
    return task.rubric


@router.get(
    "/scenarios/{scenario_id}/npcs",
    response_model=ScenarioNpcs,
    tags=["scenarios"],
    responses=NOT_FOUND,
    summary="NPC profiles of a template",
)
def list_npcs(service: ServiceDep, scenario_id: ScenarioId) -> ScenarioNpcs:
    scenario = service.scenario(scenario_id)
    return ScenarioNpcs(scenario_id=scenario.scenario_id, npc_profiles=scenario.npcs)


@router.get(
    "/scenarios/{scenario_id}/seed_data",
    response_model=SeedDataList,
    tags=["scenarios"],
    responses=NOT_FOUND,
    summary="Seed data files of a template",
)
def list_seed_data(service: ServiceDep, scenario_id: ScenarioId) -> SeedDataList:
    scenario = service.scenario(scenario_id)
    return SeedDataList(scenario_id=scenario.scenario_id, files=scenario.seed_files())


@router.get(
    "/scenarios/{scenario_id}/seed_data/{filename:path}",
    response_model=SeedDataFile,
    tags=["scenarios"],
    responses={
        400: error_doc("path traversal, an absolute path or an encoded `..`; or not a text file"),
        **NOT_FOUND,
    },
    summary="One seed data file",
)
def get_seed_file(
    service: ServiceDep,
    scenario_id: ScenarioId,
    filename: SeedFilename,
) -> SeedDataFile:
    scenario = service.scenario(scenario_id)
    try:
        return scenario.seed_file(filename)
    except ValueError as exc:  # UnicodeDecodeError included: seed data is served as text
        raise InvalidRequest(f"invalid seed data filename {filename[:200]!r}: {exc}") from None
    except FileNotFoundError:
        raise NotFound(f"seed data file {filename[:200]!r} not found in scenario {scenario.scenario_id!r}") from None
    except OSError as exc:  # a name the filesystem cannot take (too long, too deep) is the caller's mistake
        raise InvalidRequest(f"invalid seed data filename {filename[:200]!r}: {exc.strerror}") from None


@router.get(
    "/scenarios/{scenario_id}/verifiers/bundle",
    tags=["scenarios"],
    response_class=Response,
    responses={
        200: {
            "description": "ZIP of an importable package tree `collinear/scenarios/<family id>/verifiers/*.py`"
            " (the zip root is the import root)",
            "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
        },
        404: error_doc("scenario not found, or it has no verifiers"),
        500: error_doc("the scenario's verifier files cannot be bundled"),
    },
    summary="Verifier bundle (ZIP)",
)
def get_verifier_bundle(service: ServiceDep, scenario_id: ScenarioId) -> Response:
    """Also by the package name a task's verifier path gives the family (`_9lives` for `9lives`): SimLab asks
    for the bundle by that name."""
    try:
        scenario = service.scenario(scenario_id)
    except NotFound:
        family = family_of_package(scenario_id, service.catalog.ids())
        if family is None:
            raise
        scenario = service.scenario(family)
    directory = scenario.verifiers_dir
    modules = [p for p in directory.glob("*.py") if p.name != "__init__.py"] if directory.is_dir() else []
    if not (directory / "__init__.py").is_file() or not modules:
        raise NotFound(f"scenario {scenario.scenario_id!r} has no verifiers")
    try:
        data = build_bundle(scenario.scenario_id, directory)
    except BundleError as exc:  # e.g. a symlink in the package: the server's files are at fault
        logger.error("verifier bundle of %s cannot be built: %s", scenario.scenario_id, exc)
        return error_response(500, f"the verifier bundle of {scenario.scenario_id!r} cannot be built: {exc}")
    filename = f"{scenario.key}-verifiers.zip"
    return Response(
        content=data,
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
