"""The `tool_server_url`s of a task listing: `/ws/<token>/<task_id>/<server>/tools` and `/step` (spec 001's tool
server protocol, in the hosted product's shapes), each URL a seeded workspace of its caller's own
(`service/caller_workspaces.py`).

No API key: the token in the path is the credential, as SimLab's environment sends no key to a tool server.
Outside the spec-000 document: these are tool servers, not resources of the evaluation service.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from eval_pipelines.inputs.hosted import builtin_server
from eval_pipelines.inputs.scenarios import ScenarioFiles
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.service.caller_workspaces import Provision, ProvisionOrder, WorkspaceKey, WorkspaceUnavailable
from eval_pipelines.service.executor import NotFound
from eval_pipelines.service.responses import error_response
from eval_pipelines.service.state import EvaluationService, ServiceDep
from eval_pipelines.toolservers.chat import ChatServer
from eval_pipelines.toolservers.npc import npc_seed_item

#: The route prefix a listing's URLs start with, after the service's own URL.
WORKSPACES_PATH = "ws"
router = APIRouter(prefix=f"/{WORKSPACES_PATH}", include_in_schema=False)

Token = Annotated[str, Path(min_length=1, max_length=64)]
TaskId = Annotated[str, Path(min_length=1, max_length=256)]
ServerName = Annotated[str, Path(min_length=1, max_length=256)]


def listing_urls(request: Request, token: str, task: Task, hosted: Collection[str]) -> Callable[[str, str], str | None]:
    """For `served_task`: the URL of each of the task's servers that the tool host serves (`hosted`), in the
    listing `token` was minted for, at the address the caller reached this service by (SimLab rewrites the host to
    `localhost` and keeps the port and the path)."""
    service_url = str(request.base_url).rstrip("/")
    base = f"{service_url}/{WORKSPACES_PATH}/{quote(token, safe='')}/{quote(task.task_id, safe='')}"

    def url(server: str, listed_name: str) -> str | None:
        return f"{base}/{quote(listed_name, safe='')}" if server in hosted else None

    return url


def caller_seed(scenario: ScenarioFiles, task: Task, server: str) -> list[Any]:
    """A caller workspace's seed: the task's seed files for the server, as a rollout's. The NPC server also gets the
    task's NPC profiles, but never their secrets: the listing is public, and so is what its URLs reach."""
    seed = list(scenario.seed_payload(task, server))
    if server == ChatServer.name and task.npc_profiles:
        seed.append(npc_seed_item(task.npc_profiles))
    return seed


def _order(service: EvaluationService, task_id: str, listed_name: str) -> ProvisionOrder:
    def provision(scenario_id: str) -> Provision:
        scenario = service.scenario(scenario_id)
        task = scenario.tasks().get(task_id)
        if task is None:
            raise NotFound(f"task {task_id!r} not found in scenario {scenario.scenario_id!r}")
        server = builtin_server(task, listed_name)
        hosted = scenario.tool_server_urls(service.runtime.tool_server_urls())
        base = hosted.get(server) if server is not None else None
        if server is None or base is None:
            raise NotFound(f"task {task_id!r} has no tool server {listed_name!r} served here")
        return Provision(base, caller_seed(scenario, task, server))

    return provision


async def _forwarded(
    service: EvaluationService, key: WorkspaceKey, method: str, action: str, body: bytes | None = None
) -> Response:
    try:
        answer = await service.caller_workspaces.forward(key, _order(service, key[1], key[2]), method, action, body)
    except WorkspaceUnavailable as exc:
        return error_response(exc.status, exc.detail)
    return Response(content=answer.content, status_code=answer.status_code, media_type="application/json")


@router.get("/{token}/{task_id}/{server}/tools")
async def list_tools(service: ServiceDep, token: Token, task_id: TaskId, server: ServerName) -> Response:
    return await _forwarded(service, (token, task_id, server), "GET", "tools")


@router.post("/{token}/{task_id}/{server}/step")
async def step(request: Request, service: ServiceDep, token: Token, task_id: TaskId, server: ServerName) -> Response:
    return await _forwarded(service, (token, task_id, server), "POST", "step", await request.body())
