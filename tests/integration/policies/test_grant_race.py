"""I14 under concurrency: 25 proposals racing for a standing grant's last uses
get exactly those uses, never one more, on memory, SQLite and the emulator,
round after round."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from adapters.store import LedgerStore
from domain.directory import DirectoryRecord, standing_grant_record_id
from domain.errors import LedgerError
from domain.services import grants
from domain.services.proposals import ProposalResult, propose
from tests.support.policies import grant_bounds
from tests.support.worlds.approval import World, base_spec

THREADS = 25
MAX_USES = 5
USED_BEFORE = 3  # so the race is for the last two


def rounds_for(backend: str) -> int:
    return 4 if backend == "dynamodb" else 10


def race_once(world: World) -> tuple[str, list[ProposalResult | LedgerError]]:
    grant_id = str(
        grants.grant(
            world.ctx,
            actor_id="alice",
            bounds=grant_bounds(world, max_uses=MAX_USES),
            grantor=grants.Grantor("admin", "ops"),
        )["grant_id"]
    )
    for _ in range(USED_BEFORE):
        assert propose(world.ctx, actor_id="alice", spec_data=base_spec()).status == "claimed"
    barrier = threading.Barrier(THREADS)

    def press(_: int) -> ProposalResult | LedgerError:
        barrier.wait()
        try:
            return propose(world.ctx, actor_id="alice", spec_data=base_spec())
        except LedgerError as exc:  # pragma: no cover - asserted below
            return exc

    with ThreadPoolExecutor(THREADS) as pool:
        answers = list(pool.map(press, range(THREADS)))
    grants.revoke(world.ctx, grant_id=grant_id, grantor=grants.Grantor("admin", "ops"))
    return grant_id, answers


@pytest.mark.slow
def test_racing_proposals_never_use_a_grant_beyond_its_maximum(
    world: World, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["store"]
    for _ in range(rounds_for(backend)):
        grant_id, answers = race_once(world)
        errors = [a for a in answers if isinstance(a, LedgerError)]
        assert not errors, errors
        results = [a for a in answers if isinstance(a, ProposalResult)]
        claimed = [r for r in results if r.status == "claimed"]
        # every remaining use taken, no more; everyone else is left for a person
        assert len(claimed) == MAX_USES - USED_BEFORE
        assert sorted(r.approval["use"] for r in claimed) == [4, 5]  # type: ignore[index]
        assert all(r.approval["grant_id"] == grant_id for r in claimed)  # type: ignore[index]
        assert all(r.status == "presented" for r in results if r not in claimed)
        record = store.get(DirectoryRecord, standing_grant_record_id(grant_id))
        assert record is not None and record.values["uses"] == MAX_USES
        used = [
            e
            for e in store.read_stream(standing_grant_record_id(grant_id))
            if e.topic.endswith(".Used")
        ]
        assert len(used) == MAX_USES
    assert world.executor_calls() == 0
