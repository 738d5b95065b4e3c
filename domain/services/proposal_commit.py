"""The commit that stores a new proposal version, claimed in the same commit
when a policy or a standing grant approves it (``automatic.py``).

It checks the policy set's version the version was screened under, and for an
automatic claim every record of its authorization (design.md 5.2), appends the
grant's use, queues the attempt and writes its due entry. A step that loses a
race runs again on fresh reads; when the lost runs were automatic claims (a
hot standing grant's last uses) and the retries run out, the version is
stored for a person to decide instead: a grant's use is never forced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from domain.errors import ConcurrencyConflict
from domain.ports import Commit, DueWork, Lookup
from domain.proposal import Proposal, ProposalStatus
from domain.services.automatic import Screening, claim_automatically
from domain.services.context import ServiceContext
from domain.services.read_cache import commit
from domain.services.retry import retry_on_conflict
from domain.spec import ProposalSpec

T = TypeVar("T")


@dataclass(frozen=True)
class Stored:
    """How the new version was stored: ``presented``, or ``claimed`` with its attempt."""

    status: str
    attempt_id: str | None = None
    approval: dict[str, Any] | None = None


class AutomaticClaimLost(ConcurrencyConflict):
    """A commit with an automatic claim lost a race (``conflict`` says where)."""

    def __init__(self, conflict: ConcurrencyConflict) -> None:
        self.conflict = conflict
        super().__init__(conflict.stream_id)


def store_version(
    ctx: ServiceContext,
    proposal: Proposal,
    version: int,
    screening: Screening,
    spec: ProposalSpec,
    now: datetime,
    lookups: Callable[[str], list[Lookup]],
) -> Stored:
    """Commit ``version`` of ``proposal`` (its events pending); ``lookups(status)``
    are the create-only items written with it (an idempotency key's record)."""
    aggregates: list[Any] = [proposal]
    read_set = list(screening.read_set)
    due: list[DueWork] = []
    stored = Stored(ProposalStatus.PRESENTED.value)
    if screening.automatic is not None:
        try:
            claim = claim_automatically(ctx, screening.automatic, proposal, version, spec, now)
        except ConcurrencyConflict as conflict:  # the grant moved since it was read
            raise AutomaticClaimLost(conflict) from None
        aggregates += claim.aggregates
        read_set += [c for c in claim.read_set if c not in read_set]
        due = claim.due
        stored = Stored(ProposalStatus.CLAIMED.value, claim.attempt_id, claim.approval)
    work = Commit(aggregates=aggregates, read_set=read_set, due=due, lookups=lookups(stored.status))
    try:
        commit(ctx.store, ctx.cache, work)
    except ConcurrencyConflict as conflict:
        if screening.automatic is not None and not isinstance(conflict, AutomaticClaimLost):
            raise AutomaticClaimLost(conflict) from None
        raise
    return stored


def screened(once: Callable[[bool], T], stream_id: str) -> T:
    """Run a propose step (``once(automatic)``) until it commits, at most the
    retry limit; then, if the runs lost automatic claims, the same limit of runs
    without them; then ``ConcurrencyConflict``."""
    lost_automatic = [False]

    def step() -> T:
        try:
            return once(True)
        except AutomaticClaimLost as lost:
            lost_automatic[0] = True
            raise lost.conflict from None

    def contended() -> T:
        raise ConcurrencyConflict(stream_id)

    def exhausted() -> T:
        if not lost_automatic[0]:
            return contended()
        return retry_on_conflict(lambda: once(False), exhausted=contended)

    return retry_on_conflict(step, exhausted=exhausted)
