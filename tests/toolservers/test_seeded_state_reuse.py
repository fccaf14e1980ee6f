"""A workspace seeded like an earlier one starts from a copy of that one's seeded state: the seed is parsed once
per store, no workspace shares objects with another or with the kept state, a bad seed is refused every time,
and servers whose seeding is not a function of the seed alone parse every time."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import HTTPException

from eval_pipelines.toolservers import ChatServer, EmailServer
from eval_pipelines.toolservers.app import SEEDED_STATES_KEPT, WorkspaceStore
from eval_pipelines.toolservers.base import copy_state

from ._helpers import SEED


class CountingEmailServer(EmailServer):
    def __init__(self) -> None:
        super().__init__()
        self.seedings = 0

    def seed(self, state: dict[str, Any], seed_files: list[Any]) -> None:
        self.seedings += 1
        super().seed(state, seed_files)


class CountingChatServer(ChatServer):
    def __init__(self) -> None:
        super().__init__()
        self.seedings = 0

    def seed(self, state: dict[str, Any], seed_files: list[Any]) -> None:
        self.seedings += 1
        super().seed(state, seed_files)


def test_same_seed_is_parsed_once_and_gives_the_same_state() -> None:
    server = CountingEmailServer()
    store = WorkspaceStore(server)
    first = store.create("a", [SEED])
    second = store.create("b", [copy_state(SEED)])
    assert server.seedings == 1
    assert first.state == second.state
    reference = server.new_state()
    EmailServer().seed(reference, [SEED])
    assert first.state == reference


def test_workspaces_from_one_seed_share_no_objects() -> None:
    store = WorkspaceStore(CountingEmailServer())
    first = store.create("a", [SEED])
    untouched = copy_state(first.state)
    second = store.create("b", [SEED])
    some_email = next(iter(second.state["emails"].values()))
    some_email["subject"] = "changed in b"
    second.state["emails"].clear()
    second.state["settings"]["account"]["email"] = "someone@else.example"
    assert first.state == untouched
    third = store.create("c", [SEED])
    assert third.state == untouched


async def test_async_create_uses_the_kept_state() -> None:
    server = CountingEmailServer()
    store = WorkspaceStore(server)
    created = [await store.acreate(f"w{i}", [SEED]) for i in range(3)]
    assert server.seedings == 1
    assert created[0].state == created[2].state
    assert created[0].state is not created[2].state


def test_a_different_seed_is_parsed_on_its_own() -> None:
    server = CountingEmailServer()
    store = WorkspaceStore(server)
    other = {"account": "other@example.com"}
    assert store.create("a", [SEED]).state["settings"]["account"]["email"] != "other@example.com"
    assert store.create("b", [other]).state["settings"]["account"]["email"] == "other@example.com"
    assert server.seedings == 2


def test_a_bad_seed_is_refused_every_time_and_never_kept() -> None:
    server = CountingEmailServer()
    store = WorkspaceStore(server)
    for workspace_id in ("a", "b"):
        with pytest.raises(HTTPException) as refused:
            store.create(workspace_id, ["not an object"])
        assert refused.value.status_code == 400
    assert store.seeded_states == {}
    assert store.workspaces == {}


def test_kept_states_are_bounded_and_the_oldest_goes_first() -> None:
    store = WorkspaceStore(CountingEmailServer())
    seeds = [{"account": f"user{i}@example.com"} for i in range(SEEDED_STATES_KEPT + 1)]
    for i, seed in enumerate(seeds):
        store.create(f"w{i}", [seed])
    assert len(store.seeded_states) == SEEDED_STATES_KEPT
    assert b"user0@" not in b"".join(store.seeded_states)
    assert b"user1@" in b"".join(store.seeded_states)


def test_servers_with_impure_seeding_parse_every_time() -> None:
    server = CountingChatServer()
    assert not server.seeding_is_pure
    store = WorkspaceStore(server)
    for workspace_id in ("a", "b", "c"):
        store.create(workspace_id, [{}])
    assert server.seedings == 3
    assert store.seeded_states == {}
