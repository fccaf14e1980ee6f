"""What both generators share before any task exists: the resolved request, the toolset bound to built-in
servers (or simulated from the user's schemas, `schema_server`), the world each server starts from, the people
tasks name, and the NPC profiles."""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Any

from eval_pipelines.schemas.scenarios import NpcProfile
from eval_pipelines.schemas.taskgen import TaskGenRequest
from eval_pipelines.taskgen.request import ResolvedRequest, resolve_request
from eval_pipelines.taskgen.sandbox import Sandbox, build_sandbox
from eval_pipelines.taskgen.schema_server import schema_server
from eval_pipelines.taskgen.toolset import Toolset, normalise_toolset
from eval_pipelines.taskgen.values import Person, ValueFactory, people_pool
from eval_pipelines.toolservers.base import BuiltinToolServer

MIN_WORLD_SIZE = 6
MAX_WORLD_SIZE = 30


def stream(seed: int, *parts: object) -> random.Random:
    """A random stream named by `parts`; hashlib, so streams are the same in every process."""
    material = "\x1f".join([str(seed), *map(str, parts)]).encode()
    return random.Random(int.from_bytes(hashlib.sha256(material).digest()[:8], "big"))


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


@dataclass
class GenerationContext:
    resolved: ResolvedRequest
    toolset: Toolset
    #: server name -> the class serving it: the built-in one, or one simulated from the user's schemas.
    server_classes: dict[str, type[BuiltinToolServer]]
    sandboxes: dict[str, Sandbox]
    people: list[Person]
    npc_profiles: list[NpcProfile]
    used_titles: set[str] = field(default_factory=set)

    @property
    def request(self) -> TaskGenRequest:
        return self.resolved.request

    @property
    def seed(self) -> int:
        return self.resolved.diversity.seed

    @property
    def task_prefix(self) -> str:
        base = slug(self.resolved.scenario.name) or slug(self.request.preset or "") or "_".join(self.toolset.servers)
        return (base or "generated")[:40]

    def seeds(self) -> dict[str, dict[str, Any] | None]:
        return {name: sandbox.seed for name, sandbox in self.sandboxes.items()}

    def seed_files(self) -> dict[str, dict[str, Any]]:
        return {s.seed_name: s.seed for s in self.sandboxes.values() if s.seed is not None}

    def npc_for_email(self, email: str) -> NpcProfile | None:
        return next((p for p in self.npc_profiles if p.email == email), None)

    def notes(self) -> list[str]:
        sandboxes = [note for sandbox in self.sandboxes.values() for note in sandbox.notes]
        return self.resolved.notes + self.toolset.notes + sandboxes


def server_classes(toolset: Toolset) -> dict[str, type[BuiltinToolServer]]:
    """The class serving each server of the toolset; SchemaServerError (a TaskGenRequestError naming the tool
    and the parameter) when a server of the user's cannot be simulated."""
    indexes = {tool.name: tool.index for tool in toolset.tools}
    return {
        name: server.builtin or schema_server(name, server.tools, indexes) for name, server in toolset.servers.items()
    }


def check_toolset(toolset: list[dict[str, Any]]) -> None:
    """What a request's toolset must be before a job starts: field-named TaskGenRequestError otherwise."""
    server_classes(normalise_toolset(toolset))


def build_context(request: TaskGenRequest | dict[str, Any]) -> GenerationContext:
    resolved = resolve_request(request)
    toolset = normalise_toolset(resolved.request.toolset)
    classes = server_classes(toolset)
    seed = resolved.diversity.seed
    domain = resolved.workspace.email_domain
    pool = people_pool(domain, stream(seed, "people"))
    npc_people = pool[: len(resolved.npcs)]
    profiles = [
        NpcProfile(
            profile_id=slug(f"{person.first_name}_{person.last_name}"),
            first_name=person.first_name,
            last_name=person.last_name,
            email=person.email,
            occupation=npc.role,
            public_info=_public_info(npc.role, npc.typical_asks),
        )
        for person, npc in zip(npc_people, resolved.npcs, strict=True)
    ]
    people = [
        Person(p.first_name, p.last_name, p.email, npc.role) for p, npc in zip(npc_people, resolved.npcs, strict=True)
    ]
    people += pool[len(resolved.npcs) :]
    world_size = max(MIN_WORLD_SIZE, min(MAX_WORLD_SIZE, 4 + resolved.num_tasks // 3))
    used_titles: set[str] = set()
    world_rng = stream(seed, "world")
    world_values = ValueFactory(params=world_rng, entities=world_rng, people=people, used_titles=used_titles)
    sandboxes = {
        name: build_sandbox(
            server,
            classes[name],
            world_values,
            world_rng,
            agent_email=resolved.workspace.agent_email,
            world_size=world_size,
        )
        for name, server in toolset.servers.items()
    }
    return GenerationContext(
        resolved=resolved,
        toolset=toolset,
        server_classes=classes,
        sandboxes=sandboxes,
        people=people,
        npc_profiles=profiles,
        used_titles=used_titles,
    )


def _public_info(role: str, asks: list[str] | str) -> str:
    listed = [asks] if isinstance(asks, str) else list(asks)
    return f"{role}." + (f" Typical asks: {'; '.join(listed)}." if listed else "")
