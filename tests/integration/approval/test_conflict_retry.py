"""Every service retries a lost commit race on fresh reads, at most CONFLICT_RETRY_LIMIT times."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.store import LedgerStore
from domain.directory import DirectoryKind, actor_record_id
from domain.errors import ApprovalUnavailable, ConcurrencyConflict, StaleVersion
from domain.ports import Commit
from domain.services.approval import approve
from domain.services.directory import put_record
from domain.services.proposals import propose
from domain.services.retry import CONFLICT_RETRY_LIMIT, retry_on_conflict
from tests.support.worlds.approval import World, base_spec


class ConflictingStore:
    """The real store, except that the next ``conflicts`` commits lose a race."""

    def __init__(self, inner: LedgerStore) -> None:
        self.inner = inner
        self.conflicts = 0
        self.commits = 0

    def commit(self, commit: Commit) -> Any:
        self.commits += 1
        if self.conflicts:
            self.conflicts -= 1
            raise ConcurrencyConflict("someone-else")
        return self.inner.commit(commit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def rig() -> tuple[World, ConflictingStore]:
    world = World(LedgerStore(MemoryLedgerRecorder()))
    store = ConflictingStore(world.store)
    world.ctx = dataclasses.replace(world.ctx, store=store)  # type: ignore[arg-type]
    return world, store


def _approve(world: World) -> Callable[[], Any]:
    token = world.present(world.propose()).token
    return lambda: approve(world.ctx, token=token, provenance=world.who)


def _revise(world: World) -> Callable[[], Any]:
    lineage = world.propose()
    return lambda: propose(world.ctx, actor_id="alice", spec_data=base_spec(), lineage_id=lineage)


def _present(world: World) -> Callable[[], Any]:
    proposal_id = world.propose()
    return lambda: world.present(proposal_id)


def _put(world: World) -> Callable[[], Any]:
    return lambda: put_record(
        world.ctx.store,
        world.clock,
        kind=DirectoryKind.ACTOR,
        record_id=actor_record_id("carol"),
        values={"enabled": True},
    )


SERVICES = {
    "approve": (_approve, ApprovalUnavailable),
    "revise": (_revise, ConcurrencyConflict),
    "present": (_present, ConcurrencyConflict),
    "put_record": (_put, ConcurrencyConflict),
}


@pytest.mark.parametrize("name", SERVICES)
def test_a_call_that_loses_every_race_gives_up_after_the_limit(
    rig: tuple[World, ConflictingStore], name: str
) -> None:
    world, store = rig
    prepare, error = SERVICES[name]
    call = prepare(world)
    store.commits, store.conflicts = 0, CONFLICT_RETRY_LIMIT
    with pytest.raises(error) as raised:
        call()
    assert store.commits == CONFLICT_RETRY_LIMIT
    if error is ApprovalUnavailable:
        assert raised.value.reason == "contention"  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", SERVICES)
def test_a_call_that_wins_on_its_last_run_succeeds(
    rig: tuple[World, ConflictingStore], name: str
) -> None:
    world, store = rig
    prepare, _ = SERVICES[name]
    call = prepare(world)
    store.commits, store.conflicts = 0, CONFLICT_RETRY_LIMIT - 1
    assert call() is not None
    assert store.commits == CONFLICT_RETRY_LIMIT


def test_a_revision_against_an_expected_version_never_retries(
    rig: tuple[World, ConflictingStore],
) -> None:
    world, store = rig
    lineage = world.propose()
    store.commits, store.conflicts = 0, CONFLICT_RETRY_LIMIT
    with pytest.raises(StaleVersion):
        propose(
            world.ctx,
            actor_id="alice",
            spec_data=base_spec(),
            lineage_id=lineage,
            expected_version=1,
        )
    assert store.commits == 1


def test_the_helper_runs_the_step_at_most_limit_times_then_asks_exhausted() -> None:
    runs: list[int] = []

    def step() -> str:
        runs.append(1)
        raise ConcurrencyConflict("s")

    assert retry_on_conflict(step, exhausted=lambda: "gave up") == "gave up"
    assert len(runs) == CONFLICT_RETRY_LIMIT
    runs.clear()
    assert retry_on_conflict(step, exhausted=lambda: "gave up", limit=2) == "gave up"
    assert len(runs) == 2


def test_the_helper_lets_every_other_error_through_at_once() -> None:
    runs: list[int] = []

    def step() -> str:
        runs.append(1)
        raise StaleVersion()

    with pytest.raises(StaleVersion):
        retry_on_conflict(step, exhausted=lambda: "gave up")
    assert len(runs) == 1
