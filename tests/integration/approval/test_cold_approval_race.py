"""Cold approvals racing a revocation: the batched directory read is checked.

A process that has cached nothing reads the directory records of an approval
in one batch (on DynamoDB: the records' head-index entries, then the events
at those versions). Here several such approvals run at once while another
thread revokes the actor's grant, round after round. An approval whose batch
read the grant before the revocation and whose claim was sent after the
revocation was stored must fail its claim (the claim checks the grant at the
version read), read again and be refused: no queued attempt was claimed after
a newer version of its grant was stored.

On DynamoDB it runs twice: on a new table, where the grant is striped (each
claim checks the copy of the grant's version in its own shard, and the
revocation moves every copy in one transaction), and on a table made before
the layout record, where each claim checks the grant's own next slot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.directory import DirectoryKind, DirectoryRecord, grant_record_id
from domain.errors import ApprovalUnavailable
from domain.ports import Commit
from domain.services.approval import ApprovalResult, approve
from domain.services.directory import put_record
from domain.services.read_cache import ReadCache
from tests.support.stores import STORES_AND_LAYOUTS, opened_store
from tests.support.worlds.approval import World

APPROVERS = 6
GRANT = grant_record_id("alice", "tasks.write")


@pytest.fixture(params=STORES_AND_LAYOUTS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    yield from opened_store(request, tmp_path)


class CommitTimes:
    """The store, noting when each grant change was stored and each claim was sent."""

    def __init__(self, inner: LedgerStore) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self.grant_stored: list[tuple[int, float]] = []  # (version, when stored)
        self.claim_sent: dict[str, float] = {}  # attempt id -> when its claim was sent

    def commit(self, commit: Commit) -> None:
        sent = time.monotonic()
        self.inner.commit(commit)
        stored = time.monotonic()
        with self._lock:
            for aggregate in commit.aggregates:
                if aggregate.id == GRANT:
                    self.grant_stored.append((aggregate.version, stored))
                elif isinstance(aggregate, ExecutionAttempt):
                    self.claim_sent[aggregate.id] = sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def race_once(world: World, store: CommitTimes) -> list[ApprovalResult | ApprovalUnavailable]:
    put_record(
        store,
        world.clock,
        kind=DirectoryKind.PERMISSION_GRANT,  # type: ignore[arg-type]
        record_id=GRANT,
        values={"granted": True},
    )
    tokens = [world.present(world.propose()).token for _ in range(APPROVERS)]
    barrier = threading.Barrier(APPROVERS + 1)

    def cold_approval(i: int) -> ApprovalResult | ApprovalUnavailable:
        # a process that has cached nothing
        ctx = replace(world.ctx, store=store, cache=ReadCache())
        barrier.wait()
        try:
            return approve(ctx, token=tokens[i], provenance=world.who)
        except ApprovalUnavailable as refused:
            return refused

    def revoke() -> None:
        barrier.wait()
        put_record(
            store,
            world.clock,
            kind=DirectoryKind.PERMISSION_GRANT,  # type: ignore[arg-type]
            record_id=GRANT,
            values={"granted": False},
        )

    with ThreadPoolExecutor(APPROVERS + 1) as pool:
        revoked = pool.submit(revoke)
        answers = [pool.submit(cold_approval, i) for i in range(APPROVERS)]
        revoked.result()
        return [a.result() for a in answers]


@pytest.mark.slow
def test_no_cold_approval_is_claimed_after_its_grant_moved_on(
    world: World, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    kind = request.node.callspec.params["store"]
    recorder: Any = store.recorder
    if kind == "dynamodb":
        assert recorder.layout.checks_shards  # the claims check shard copies
    elif kind == "dynamodb-legacy":
        assert not recorder.layout.directory_shards  # the claims check the grant's slot
    rounds = 16 if kind == "dynamodb" else 8
    timed = CommitTimes(store)
    queued = refused = 0
    for _ in range(rounds):
        for answer in race_once(world, timed):
            if isinstance(answer, ApprovalUnavailable):
                assert answer.reason == "permission_not_granted", answer.reason
                refused += 1
                continue
            queued += 1
            attempt = store.get(ExecutionAttempt, answer.attempt_id)
            assert attempt is not None and attempt.authorized
            read = dict((stream_id, version) for stream_id, version in attempt.authorized)[GRANT]
            sent = timed.claim_sent[answer.attempt_id]
            moved = [v for v, stored in timed.grant_stored if v > read and stored < sent]
            assert not moved, f"claimed on grant v{read} after v{moved[0]} was stored"
    grant = store.get(DirectoryRecord, GRANT)
    assert grant is not None and grant.flag("granted") is False  # the last revocation held
    assert queued + refused == rounds * APPROVERS
