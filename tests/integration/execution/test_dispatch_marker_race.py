"""Dispatch markers racing a withdrawal of their executor build (memory, SQLite,
a striped DynamoDB table and one made before the layout record).

Several cold workers (nothing cached) process attempts of one build at once
while another thread withdraws the build, round after round. On a striped
table each marker checks the copy of the build's version in its own shard, and
the withdrawal moves every copy in its one transaction. Whatever the
interleaving: no marker whose commit was sent after the withdrawal was stored
may be stored on the version before it, and no attempt is called without a
stored marker.
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

from adapters.executors.fake import fake_build_digest
from adapters.store import LedgerStore
from domain.directory import DirectoryKind, executor_build_record_id
from domain.ports import Commit
from domain.services.directory import put_record
from domain.services.execution import Outcome, Worker, WorkerPolicy
from domain.services.read_cache import ReadCache
from tests.support.stores import STORES_AND_LAYOUTS, opened_store
from tests.support.worlds.execution import LEASE, MODES, ExecutionWorld

MODE = "provider_idempotency"
CAPABILITY = MODES[MODE]
BUILD = executor_build_record_id(CAPABILITY, fake_build_digest(CAPABILITY))
WORKERS = 6


@pytest.fixture(params=STORES_AND_LAYOUTS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    yield from opened_store(request, tmp_path)


class MarkerTimes:
    """The store, noting when each build change was stored and, for each marker,
    when it was sent and which build version it checked."""

    def __init__(self, inner: LedgerStore) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self.build_stored: list[tuple[int, float]] = []
        self.marker_sent: dict[str, tuple[float, int]] = {}

    def commit(self, commit: Commit) -> None:
        events = [type(e).__qualname__ for a in commit.aggregates for e in a.pending_events]
        sent = time.monotonic()
        self.inner.commit(commit)
        stored = time.monotonic()
        checked = {c.stream_id: c.version for c in commit.read_set}
        with self._lock:
            for aggregate in commit.aggregates:
                if aggregate.id == BUILD:
                    self.build_stored.append((aggregate.version, stored))
            if "ExecutionAttempt.DispatchStarted" in events and BUILD in checked:
                self.marker_sent[commit.aggregates[0].id] = (sent, checked[BUILD])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def put_build(xworld: ExecutionWorld, store: Any, available: bool) -> None:
    put_record(
        store,
        xworld.clock,
        kind=DirectoryKind.EXECUTOR_BUILD,
        record_id=BUILD,
        values={"delivery_mode": MODE, "available": available},
    )


def race_once(xworld: ExecutionWorld, timed: MarkerTimes) -> list[tuple[str, Outcome]]:
    put_build(xworld, timed, available=True)
    attempts = [xworld.approved(MODE) for _ in range(WORKERS)]
    barrier = threading.Barrier(WORKERS + 1)

    def cold_worker(attempt_id: str) -> tuple[str, Outcome]:
        ctx = replace(xworld.ctx, store=timed, cache=ReadCache())  # type: ignore[arg-type]
        worker = Worker(ctx, WorkerPolicy(lease_seconds=LEASE))
        barrier.wait()
        return attempt_id, worker.process(attempt_id)

    def withdraw() -> None:
        barrier.wait()
        put_build(xworld, timed, available=False)

    with ThreadPoolExecutor(WORKERS + 1) as pool:
        withdrawn = pool.submit(withdraw)
        outcomes = [pool.submit(cold_worker, a) for a in attempts]
        withdrawn.result()
        return [o.result() for o in outcomes]


@pytest.mark.slow
def test_no_marker_is_stored_on_a_build_version_withdrawn_before_it_was_sent(
    xworld: ExecutionWorld, store: LedgerStore, request: pytest.FixtureRequest
) -> None:
    kind = request.node.callspec.params["store"]
    recorder: Any = store.recorder
    if kind == "dynamodb":
        assert recorder.layout.checks_shards  # the markers check shard copies
    elif kind == "dynamodb-legacy":
        assert not recorder.layout.directory_shards  # the markers check the record's slot
    rounds = 6 if kind.startswith("dynamodb") else 4
    timed = MarkerTimes(store)
    dispatched = failed = 0
    for _ in range(rounds):
        for attempt_id, outcome in race_once(xworld, timed):
            attempt = xworld.attempt(attempt_id)
            if "DispatchStarted" not in xworld.topics(attempt_id):
                assert outcome is Outcome.FAILED_SAFE, outcome
                assert attempt.result is not None
                assert attempt.result["reason_code"] == "executor_build_unavailable"
                assert xworld.calls_for(attempt_id) == 0
                failed += 1
                continue
            dispatched += 1
            sent, read = timed.marker_sent[attempt_id]
            moved = [v for v, stored in timed.build_stored if v > read and stored < sent]
            assert not moved, f"marker on build v{read} sent after v{moved[0]} was stored"
            assert xworld.calls_for(attempt_id) == 1
    assert dispatched + failed == rounds * WORKERS
    assert failed, "no round let the withdrawal win: the race never happened"
