"""The read cache's staleness never matters (memory, SQLite, ministack).

A change made elsewhere (another process: here, straight through the store,
past this context's cache) leaves the cache holding the old record. The
commit that acts on the cached read condition-checks it, so the stale entry
makes that commit conflict, the entry is dropped, and the step decides again
on fresh reads.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from domain.attempt import ExecutionAttempt
from domain.directory import DirectoryKind, grant_record_id
from domain.errors import ApprovalUnavailable, ConcurrencyConflict
from domain.ports import Commit
from domain.proposal import Proposal
from domain.services.approval import approve
from domain.services.execution import Outcome
from domain.services.read_cache import DirectorySnapshot, ReadCache
from tests.support.raw_views import event_fields
from tests.support.worlds.execution import MODES, ExecutionWorld

GRANT = grant_record_id("alice", "tasks.write")


class ConflictLog:
    """The store, remembering every commit that conflicted and what it checked."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.conflicts: list[tuple[list[str], list[tuple[str, int]]]] = []
        self.proposal_reads = 0

    def commit(self, commit: Commit) -> None:
        events = [type(e).__qualname__ for a in commit.aggregates for e in a.pending_events]
        try:
            self.inner.commit(commit)
        except ConcurrencyConflict:
            self.conflicts.append((events, [(c.stream_id, c.version) for c in commit.read_set]))
            raise

    def get(self, cls: Any, stream_id: str) -> Any:
        if cls is Proposal:
            self.proposal_reads += 1
        return self.inner.get(cls, stream_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def revoke_elsewhere(xworld: ExecutionWorld, granted: bool = False) -> None:
    """Change the grant past this context's cache, as another process would."""
    xworld.put(DirectoryKind.PERMISSION_GRANT, GRANT, granted=granted)


def cached_grant(xworld: ExecutionWorld) -> DirectorySnapshot:
    held = xworld.ctx.cache.get(GRANT)
    assert isinstance(held, DirectorySnapshot)
    return held


@pytest.mark.parametrize("mode", ["provider_idempotency", "correlation_lookup"])
def test_a_revoked_grant_is_caught_at_the_dispatch_marker_when_the_cache_holds_the_old_grant(
    xworld: ExecutionWorld, mode: str
) -> None:
    attempt_id = xworld.approved(mode)
    old = cached_grant(xworld)
    assert old.flag("granted")
    revoke_elsewhere(xworld)
    assert cached_grant(xworld) == old  # the cache still says granted
    log = ConflictLog(xworld.store)
    xworld.ctx = replace(xworld.ctx, store=log)

    assert xworld.worker().process(attempt_id) is Outcome.FAILED_SAFE

    # The recheck passed on the cached grant; the marker's condition check on it failed.
    ((events, checked),) = log.conflicts
    assert events == ["ExecutionAttempt.DispatchStarted"]
    assert (GRANT, old.version) in checked
    attempt = xworld.attempt(attempt_id)
    assert attempt.result is not None
    assert attempt.result["reason_code"] == "permission_not_granted"
    assert "DispatchStarted" not in xworld.topics(attempt_id)
    assert xworld.calls_for(attempt_id) == 0
    assert not cached_grant(xworld).flag("granted")  # dropped, then read fresh


def test_a_revoked_grant_is_caught_at_the_approval_commit_when_the_cache_holds_the_old_grant(
    xworld: ExecutionWorld,
) -> None:
    xworld.approved("provider_idempotency")  # warms the cache with the grant
    old = cached_grant(xworld)
    proposal_id = xworld.propose()
    token = xworld.present(proposal_id).token
    revoke_elsewhere(xworld)
    assert cached_grant(xworld) == old
    log = ConflictLog(xworld.store)
    xworld.ctx = replace(xworld.ctx, store=log)

    with pytest.raises(ApprovalUnavailable) as refused:
        approve(xworld.ctx, token=token, provenance=xworld.who)

    assert refused.value.reason == "permission_not_granted"
    ((events, checked),) = log.conflicts
    assert events == ["Proposal.Claimed", "ExecutionAttempt.Queued"]
    assert (GRANT, old.version) in checked
    proposal = xworld.store.get(Proposal, proposal_id)
    assert proposal is not None and proposal.versions[1]["status"] == "presented"


def test_a_stale_revoked_grant_in_the_cache_refuses_nothing(xworld: ExecutionWorld) -> None:
    """The other direction: the cache says revoked, the directory says granted again."""
    proposal_id = xworld.propose()
    revoke_elsewhere(xworld)
    with pytest.raises(ApprovalUnavailable):
        approve(xworld.ctx, token=xworld.present(proposal_id).token, provenance=xworld.who)
    assert not cached_grant(xworld).flag("granted")
    revoke_elsewhere(xworld, granted=True)  # elsewhere: this cache still says revoked

    # propose's own grant check reads the revoked entry, then the directory: granted
    attempt_id = approve(
        xworld.ctx, token=xworld.present(xworld.propose()).token, provenance=xworld.who
    ).attempt_id
    assert cached_grant(xworld).flag("granted")
    revoke_elsewhere(xworld, granted=False)
    revoke_elsewhere(xworld, granted=True)
    xworld.ctx.cache.put(
        GRANT, DirectorySnapshot.of(GRANT, cached_grant(xworld).version + 1, {"granted": False})
    )
    assert xworld.worker().process(attempt_id) is Outcome.SUCCEEDED
    assert xworld.calls_for(attempt_id) == 1


def test_a_cold_worker_reads_only_the_versions_the_approval_stored(
    xworld: ExecutionWorld,
) -> None:
    attempt_id = xworld.approved("provider_idempotency")
    queued = xworld.attempt(attempt_id)
    assert queued.spec is not None and queued.authorized
    assert (GRANT, cached_grant(xworld).version) in queued.authorized
    log = ConflictLog(xworld.store)
    batches: list[list[tuple[str, int]]] = []

    def events_at(keys: Any) -> Any:
        batches.append(list(keys))
        return xworld.store.events_at(keys)

    log.events_at = events_at  # type: ignore[attr-defined]
    xworld.ctx = replace(xworld.ctx, store=log, cache=ReadCache())
    assert xworld.worker().process(attempt_id) is Outcome.SUCCEEDED
    # one batch: every record at its approved version (an absent one, here the policy
    # set at version 0, has nothing to read: the marker checks it is still absent)
    assert batches == [[(i, v) for i, v in queued.authorized if v > 0]]
    assert log.proposal_reads == 0 and not log.conflicts


def test_an_attempt_queued_before_the_new_fields_is_rechecked_from_its_streams(
    xworld: ExecutionWorld,
) -> None:
    """A ``Queued`` event stored without ``spec`` and ``authorized`` still decodes,
    and the worker falls back to reading the proposal and the directory."""
    attempt_id = xworld.approved("provider_idempotency")
    stored = xworld.store.read_stream(attempt_id)[0]
    state = json.loads(stored.state)
    fields = event_fields(state)  # either stored form
    assert "spec" in fields and "authorized" in fields
    del fields["spec"], fields["authorized"]
    old = replace(stored, state=json.dumps(state).encode())
    event: Any = xworld.store.mapper.to_domain_event(old)
    replayed: Any = event.mutate(None)
    assert replayed.spec is None and replayed.authorized is None

    class OldQueued(ConflictLog):
        def get(self, cls: Any, stream_id: str) -> Any:
            found = super().get(cls, stream_id)
            if cls is ExecutionAttempt and found is not None:
                found.spec, found.authorized = None, None  # what the old event replays to
            return found

    log = OldQueued(xworld.store)
    xworld.ctx = replace(xworld.ctx, store=log, cache=ReadCache())
    assert xworld.worker().process(attempt_id) is Outcome.SUCCEEDED
    assert log.proposal_reads == 1
    assert xworld.calls_for(attempt_id) == 1


def test_a_target_tracked_after_approval_is_caught_at_the_marker(
    xworld: ExecutionWorld,
) -> None:
    """The approval saw the target untracked (stored as version 0 on ``Queued``);
    the recheck takes that without a read, and the marker checks it."""
    from domain.directory import target_record_id

    untracked = target_record_id("task:99")
    proposal_id = xworld.propose(
        capability=MODES["provider_idempotency"], target={"id": "task:99", "base_revision": "r1"}
    )
    attempt_id = approve(
        xworld.ctx, token=xworld.present(proposal_id).token, provenance=xworld.who
    ).attempt_id
    assert (untracked, 0) in (xworld.attempt(attempt_id).authorized or [])
    xworld.put(DirectoryKind.TARGET, untracked, revision="r2")  # elsewhere
    log = ConflictLog(xworld.store)
    xworld.ctx = replace(xworld.ctx, store=log)

    assert xworld.worker().process(attempt_id) is Outcome.FAILED_SAFE

    ((events, checked),) = log.conflicts
    assert events == ["ExecutionAttempt.DispatchStarted"] and (untracked, 0) in checked
    attempt = xworld.attempt(attempt_id)
    assert attempt.result is not None and attempt.result["reason_code"] == "target_drift"
    assert xworld.calls_for(attempt_id) == 0
