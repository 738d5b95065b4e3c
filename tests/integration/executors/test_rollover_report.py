"""What switching executors would do: pending work by build, read through the
indexes of every store (due work, head index, inbox lists)."""

from __future__ import annotations

import dataclasses

import pytest

from adapters.executors.fake import fake_build_digest
from adapters.executors.rollover import Bound, compare, pending_work
from adapters.store import LedgerStore
from domain.services.approval import approve
from domain.services.execution import CrashPoint, Outcome, SimulatedCrash
from domain.services.recovery import run_recovery
from projections.ports import ViewStore
from projections.projector import Projector
from tests.support.worlds.builds import allow_v2, registry_with, v2_digest, worker_hosting
from tests.support.worlds.execution import CrashAt, ExecutionWorld

CAPABILITY = "fake.provider_idempotency"
V1 = (CAPABILITY, fake_build_digest(CAPABILITY))
V2 = (CAPABILITY, v2_digest(CAPABILITY))


@pytest.fixture
def views(store: LedgerStore) -> ViewStore:
    from adapters.bootstrap import backend_for

    return backend_for(store.recorder).views


def open_presentation(world: ExecutionWorld, n: int, build: str = V1[1]) -> str:
    ctx = dataclasses.replace(world.ctx, registry=registry_with(world, v1=True, v2=True))
    from domain.services.proposals import present, propose
    from tests.support.worlds.approval import base_spec

    proposal = propose(
        ctx,
        actor_id=world.actor,
        spec_data=base_spec(executor_build=build, content={"title": "Buy milk", "n": n}),
    )
    return present(
        ctx,
        proposal_id=proposal.proposal_id,
        version=1,
        identity_binding_id="ib1",
        channel_binding_id="cb1",
        conversation_key="conv-1",
    ).token


def test_pending_work_is_counted_by_the_build_it_is_bound_to(
    xworld: ExecutionWorld, store: LedgerStore, views: ViewStore
) -> None:
    allow_v2(xworld)
    queued = [xworld.approved("provider_idempotency") for _ in range(2)]
    tokens = [open_presentation(xworld, n) for n in range(5)]
    open_presentation(xworld, 9, build=V2[1])
    executing = xworld.approved("provider_idempotency")
    settled = xworld.approved("provider_idempotency")
    assert xworld.worker().process(settled) is Outcome.SUCCEEDED
    with pytest.raises(SimulatedCrash):  # leased, then the worker died: still executing
        xworld.worker(CrashAt(CrashPoint.AFTER_LEASE)).process(executing)
    consumed = approve(xworld.ctx, token=tokens.pop(), provenance=xworld.who).attempt_id
    projector = Projector(store, views)
    projector.project_streams([*xworld.tokens.proposal_ids, *queued, executing, consumed])

    found = pending_work(store, views, xworld.clock.now())

    assert found == {V1: Bound(queued=3, executing=1, presentations=4), V2: Bound(presentations=1)}


def test_the_report_names_what_a_file_drops_and_what_it_keeps_draining(
    xworld: ExecutionWorld, store: LedgerStore, views: ViewStore
) -> None:
    allow_v2(xworld)
    for _ in range(2):
        xworld.approved("provider_idempotency")
    for n in range(5):
        open_presentation(xworld, n)
    Projector(store, views).project_streams(xworld.tokens.proposal_ids)
    now = xworld.clock.now()

    dropping = compare(registry_with(xworld, v1=False, v2=True).entries(), store, views, now)
    assert dropping.dropped == [(V1, Bound(queued=2, presentations=5))]
    assert (
        "2 queued attempts and 5 open presentations are bound to "
        f"{V1[0]} {V1[1]}, which this file drops"
    ) in dropping.lines()

    rolled = registry_with(xworld, v1=True, v2=True, v1_draining=True)
    keeping = compare(rolled.entries(), store, views, now)
    assert keeping.dropped == [] and keeping.mismatched == []
    assert (
        f"{V1[0]} {V1[1]} draining: available in the directory; "
        "2 queued attempts and 5 open presentations"
    ) in keeping.lines()
    assert f"{V2[0]} {V2[1]} current: available in the directory; no pending work" in (
        keeping.lines()
    )

    # drained: every attempt ran on its build, and no control is open any more
    run_recovery(worker_hosting(xworld, rolled))
    xworld.clock.advance(86_400)  # every control expired
    assert (
        compare(
            registry_with(xworld, v1=False, v2=True).entries(), store, views, xworld.clock.now()
        ).dropped
        == []
    )
