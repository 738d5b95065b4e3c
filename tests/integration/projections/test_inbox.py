"""The inbox projection on every backend: rows per actor and status, expiry
derived at read time from the list order, paging with the store's cursor."""

from __future__ import annotations

from datetime import datetime

from adapters.store import LedgerStore
from domain.proposal import ProposalStatus
from domain.services.decisions import cancel, decline
from projections.inbox import list_inbox
from projections.ports import ViewStore
from projections.projector import Projector
from tests.support.worlds.execution import ExecutionWorld


def page_all(views: ViewStore, status: ProposalStatus, now: datetime, limit: int = 1) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        rows, cursor = list_inbox(views, "alice", status, now, limit, cursor)
        seen += [row["proposal_id"] for row in rows]
        assert all(row["status"] == status.value for row in rows)
        if cursor is None:
            return seen


def test_the_inbox_lists_by_status_with_expiry_derived_from_the_clock(
    pworld: ExecutionWorld,
    store: LedgerStore,
    views: ViewStore,
    projector: Projector,
) -> None:
    soon, later, declined, canceled = (pworld.propose() for _ in range(4))
    pworld.present(soon, ttl_seconds=60)
    pworld.present(later, ttl_seconds=600)
    refused = pworld.present(declined)
    pworld.present(canceled)
    decline(pworld.ctx, token=refused.token, provenance=pworld.who)
    cancel(pworld.ctx, proposal_id=canceled, version=1)
    streams = [soon, later, declined, canceled]
    assert projector.project_streams(streams) == 8  # each an inbox row and a watch row
    assert projector.project_streams(streams) == 0  # idempotent

    now = pworld.clock.now()
    assert page_all(views, ProposalStatus.PRESENTED, now) == [soon, later]
    assert page_all(views, ProposalStatus.EXPIRED, now) == []
    assert page_all(views, ProposalStatus.DECLINED, now) == [declined]
    assert page_all(views, ProposalStatus.CANCELED, now) == [canceled]

    pworld.clock.advance(60)
    now = pworld.clock.now()
    assert page_all(views, ProposalStatus.PRESENTED, now) == [later]
    assert page_all(views, ProposalStatus.EXPIRED, now) == [soon]
    pworld.clock.advance(600)
    now = pworld.clock.now()
    assert page_all(views, ProposalStatus.PRESENTED, now, limit=5) == []
    assert page_all(views, ProposalStatus.EXPIRED, now, limit=5) == [soon, later]
