"""Reads per lifecycle with the read cache, against the targets (memory, SQLite, ministack).

DynamoDB: at most 2 consistent reads per worker attempt (the attempt stream,
and one ``BatchGetItem`` for the directory versions a worker has not cached;
1 when it has) and at most 10 requests per lifecycle (propose, present,
approve, worker).
SQLite and memory: at most 6 store reads per lifecycle. The previous reads
(cache off) are counted in the same test, so the figures are side by side;
``-s`` prints them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder
from domain.services.approval import approve
from domain.services.execution import Outcome
from domain.services.read_cache import ReadCache
from tests.support.faults import recorder_reads
from tests.support.worlds.execution import MODES, ExecutionWorld

MODE = "provider_idempotency"


class Counts:
    """Store requests of a stretch of work: by DynamoDB operation, or recorder reads."""

    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()
        self.consistent = 0

    @property
    def requests(self) -> int:
        return sum(self.ops.values())

    @property
    def reads(self) -> int:
        return sum(
            n
            for op, n in self.ops.items()
            if op
            in (
                "Query",
                "GetItem",
                "BatchGetItem",
                "select_events",
                "get_lookup",
                "select_events_at",
                "select_latest_events",
            )
        )


@contextmanager
def counting(xworld: ExecutionWorld) -> Iterator[Counts]:
    counts = Counts()
    recorder: Any = xworld.store.recorder
    if isinstance(recorder, DynamoDBLedgerRecorder):
        events = recorder.client.meta.events

        def seen(params: dict[str, Any], model: Any, **_: Any) -> None:
            counts.ops[model.name] += 1
            consistent = params.get("ConsistentRead") or any(
                t.get("ConsistentRead")
                for t in params.get("RequestItems", {}).values()
                if isinstance(t, dict)
            )
            if model.name in ("Query", "GetItem", "BatchGetItem") and consistent:
                counts.consistent += 1

        events.register("provide-client-params.dynamodb", seen)
        try:
            yield counts
        finally:
            events.unregister("provide-client-params.dynamodb", seen)
        return
    with recorder_reads(recorder) as reads:  # one SELECT each on SQLite
        yield counts
    counts.ops.update(reads)
    counts.consistent += sum(reads.values())


def lifecycle(xworld: ExecutionWorld) -> tuple[Counts, Counts]:
    """(the whole lifecycle, the worker alone)."""
    with counting(xworld) as whole:
        token = xworld.present(
            xworld.propose(
                capability=MODES[MODE],
                content={"title": "Buy milk", "simulate": "success"},
            )
        ).token
        attempt_id = approve(xworld.ctx, token=token, provenance=xworld.who).attempt_id
    with counting(xworld) as worker:
        assert xworld.worker().process(attempt_id) is Outcome.SUCCEEDED
    whole.ops.update(worker.ops)
    whole.consistent += worker.consistent
    return whole, worker


def test_a_lifecycle_meets_the_read_targets_side_by_side_with_the_previous_reads(
    xworld: ExecutionWorld,
) -> None:
    dynamodb = isinstance(xworld.store.recorder, DynamoDBLedgerRecorder)
    xworld.approved(MODE)  # this process has served the actor before
    after, after_worker = lifecycle(xworld)

    attempt_id = xworld.approved(MODE)
    cold = xworld.worker()
    cold.ctx = replace(xworld.ctx, cache=ReadCache())  # a worker that has cached nothing
    with counting(xworld) as cold_worker:
        assert cold.process(attempt_id) is Outcome.SUCCEEDED

    xworld.ctx = replace(xworld.ctx, cache=ReadCache(0))  # the previous reads
    before, before_worker = lifecycle(xworld)

    print(
        f"\n{type(xworld.store.recorder).__name__}: lifecycle requests "
        f"{before.requests} -> {after.requests} ({dict(after.ops)}), reads "
        f"{before.reads} -> {after.reads}; worker consistent reads {before_worker.consistent}"
        f" -> {after_worker.consistent} (cold worker {cold_worker.consistent})"
    )
    assert after_worker.consistent == 1  # the attempt stream
    assert before_worker.consistent == 9  # attempt, proposal, seven directory records
    if dynamodb:
        assert after.requests <= 10 < before.requests
        assert cold_worker.consistent <= 2
        assert cold_worker.ops["BatchGetItem"] == 1
    else:
        assert after.reads <= 6 < before.reads
        # no proposal read; the six pinned versions in one SELECT on SQLite, one
        # lookup each in memory
        sqlite = isinstance(xworld.store.recorder, SQLiteLedgerRecorder)
        assert cold_worker.consistent == (2 if sqlite else 7)


def test_a_cold_approval_reads_the_directory_records_in_two_batches(
    xworld: ExecutionWorld,
) -> None:
    """A process that has cached nothing: on DynamoDB the directory records
    are their head-index entries and then those versions, two ``BatchGetItem``s
    instead of a ``Query`` each (one SELECT on SQLite); the claim commit checks
    each at that version."""
    dynamodb = isinstance(xworld.store.recorder, DynamoDBLedgerRecorder)

    def cold_approval(cache: ReadCache) -> tuple[Counts, str]:
        token = xworld.present(
            xworld.propose(
                capability=MODES[MODE],
                content={"title": "Buy milk", "simulate": "success"},
            )
        ).token
        with counting(xworld) as counts:
            attempt_id = approve(
                replace(xworld.ctx, cache=cache), token=token, provenance=xworld.who
            ).attempt_id
        return counts, attempt_id

    before, _ = cold_approval(ReadCache(0))  # the previous reads: a Query per record
    after, attempt_id = cold_approval(ReadCache())
    print(
        f"\n{type(xworld.store.recorder).__name__}: cold approval {dict(before.ops)} -> "
        f"{dict(after.ops)}"
    )
    queued = xworld.attempt(attempt_id)
    assert queued.authorized and len(queued.authorized) == 7  # six records, the policy set (absent)
    assert xworld.worker().process(attempt_id) is Outcome.SUCCEEDED
    if dynamodb:
        # the token lookup, the proposal stream, heads + versions, the claim
        # (and the policy set's stream, absent here)
        assert dict(before.ops) == {"GetItem": 1, "Query": 8, "TransactWriteItems": 1}
        # the policy set has no head entry while none was applied: a Query says it is
        # absent (once per process: the absence is cached, and checked by the claim)
        assert dict(after.ops) == {
            "GetItem": 1,
            "Query": 2,
            "BatchGetItem": 2,
            "TransactWriteItems": 1,
        }
    elif isinstance(xworld.store.recorder, SQLiteLedgerRecorder):
        # the token lookup, the proposal stream, the six records in one SELECT
        assert after.reads == 3 < before.reads
    else:  # one lookup per record in memory, as before
        assert after.reads == before.reads
