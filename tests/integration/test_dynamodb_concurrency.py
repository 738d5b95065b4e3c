"""Concurrency proofs on the emulator with real boto3 clients, one per thread.

Each race is repeated for many rounds; a barrier releases all threads at once
so every round really is a race.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from adapters.dynamodb import items as it
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.recorder import LookupConflictError, StreamConflictError
from domain.ports import DueWork, Lookup, ReadCheck
from tests.support.dynamodb_events import at, event, existing, new_stream
from tests.support.dynamodb_fixtures import new_client

pytestmark = [pytest.mark.dynamodb, pytest.mark.slow]

THREADS = 25
ROUNDS = 20

Outcome = str  # "ok", "conflict:<stream>", "lookup:<key>" or an error's repr


@pytest.fixture(scope="module")
def clients(dynamodb_endpoint: str) -> Iterator[list[Any]]:
    made = [new_client(dynamodb_endpoint) for _ in range(THREADS)]
    yield made
    for client in made:
        client.close()


@pytest.fixture
def recorders(clients: list[Any], dynamodb_table_name: str) -> list[DynamoDBLedgerRecorder]:
    return [DynamoDBLedgerRecorder(dynamodb_table_name, client) for client in clients]


def race(rounds: int, threads: int, attempt: Callable[[int, int], None]) -> list[list[Outcome]]:
    """Run ``attempt(round, thread)`` on every thread, all released together per round."""
    barrier = threading.Barrier(threads)
    outcomes: list[list[Outcome]] = [["" for _ in range(threads)] for _ in range(rounds)]

    def worker(thread: int) -> None:
        for rnd in range(rounds):
            barrier.wait(timeout=60)
            try:
                attempt(rnd, thread)
                outcomes[rnd][thread] = "ok"
            except StreamConflictError as exc:
                outcomes[rnd][thread] = f"conflict:{exc.stream_id}"
            except LookupConflictError as exc:
                outcomes[rnd][thread] = f"lookup:{exc.key}"
            except Exception as exc:  # recorded, then asserted on
                outcomes[rnd][thread] = repr(exc)

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    return outcomes


def test_same_version_of_one_stream_has_exactly_one_winner(
    recorders: list[DynamoDBLedgerRecorder],
) -> None:
    streams = [new_stream("race") for _ in range(ROUNDS)]
    for stream in streams:  # every round races for version 2 of a live stream
        recorders[0].insert_events([event(stream, 1)])

    def append(rnd: int, thread: int) -> None:
        recorders[thread].insert_events([event(streams[rnd], 2, f"writer-{thread}".encode())])

    outcomes = race(ROUNDS, THREADS, append)
    for rnd, results in enumerate(outcomes):
        winners = [t for t, o in enumerate(results) if o == "ok"]
        assert len(winners) == 1, results
        assert results.count(f"conflict:{streams[rnd]}") == THREADS - 1, results
        stored = recorders[0].select_events(streams[rnd])
        assert [e.originator_version for e in stored] == [1, 2]
        assert stored[1].state == f"writer-{winners[0]}".encode()


def test_multi_stream_commits_with_overlapping_read_sets_have_one_winner(
    recorders: list[DynamoDBLedgerRecorder], dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    """The approval shape: claim the proposal, queue a new attempt, write its
    token lookup and due work, check the directory records are unchanged."""
    actor, grant = new_stream("actor"), new_stream("grant")
    recorders[0].insert_events([event(actor, 1), event(grant, 1)])
    proposals = [new_stream("proposal") for _ in range(ROUNDS)]
    for proposal in proposals:
        recorders[0].insert_events([event(proposal, 1)])

    def claim(rnd: int, thread: int) -> None:
        attempt = f"att-{rnd}-{thread}"
        recorders[thread].insert_events(
            [event(proposals[rnd], 2, f"claimed-by-{thread}".encode()), event(attempt, 1)],
            read_checks=[ReadCheck(actor, 1), ReadCheck(grant, 1)],
            lookups=[Lookup(f"attempt-of-{rnd}-{thread}", {"attempt": attempt})],
            due=[DueWork(attempt, at(rnd))],
        )

    outcomes = race(ROUNDS, THREADS, claim)
    reader = recorders[0]
    for rnd, results in enumerate(outcomes):
        winners = [t for t, o in enumerate(results) if o == "ok"]
        assert len(winners) == 1, results
        assert results.count(f"conflict:{proposals[rnd]}") == THREADS - 1, results
        keys = [it.event_key(f"att-{rnd}-{t}", 1) for t in range(THREADS)]
        keys += [it.lookup_key(f"attempt-of-{rnd}-{t}") for t in range(THREADS)]
        keys += [it.due_key(f"att-{rnd}-{t}") for t in range(THREADS)]
        found = existing(dynamodb_client, dynamodb_table_name, keys)
        expected = [t == winners[0] for t in range(THREADS)] * 3  # losers left nothing
        assert found == expected
    due = reader.select_due(at(ROUNDS), 1000)[0]
    assert len(due) == ROUNDS


def test_read_set_checks_prevent_write_skew(
    recorders: list[DynamoDBLedgerRecorder], dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    """Each thread writes only its own stream, but only if nobody else has
    written theirs: the writes never collide, so only the read set can stop a
    second winner."""

    def stream(rnd: int, thread: int) -> str:
        return f"skew-{rnd}-{thread}"

    def write_if_alone(rnd: int, thread: int) -> None:
        others = [ReadCheck(stream(rnd, t), 0) for t in range(THREADS) if t != thread]
        recorders[thread].insert_events([event(stream(rnd, thread), 1)], read_checks=others)

    outcomes = race(ROUNDS, THREADS, write_if_alone)
    for rnd, results in enumerate(outcomes):
        winners = [t for t, o in enumerate(results) if o == "ok"]
        assert len(winners) == 1, results
        assert all(o.startswith("conflict:skew-") for o in results if o != "ok"), results
        keys = [it.event_key(stream(rnd, t), 1) for t in range(THREADS)]
        found = existing(dynamodb_client, dynamodb_table_name, keys)
        assert [t for t in range(THREADS) if found[t]] == winners


FAILURES = ("first-event", "last-event", "read-set", "lookup")


def test_one_failing_condition_leaves_nothing_written(
    recorders: list[DynamoDBLedgerRecorder], dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    recorder = recorders[0]
    for rnd in range(ROUNDS):
        failing = FAILURES[rnd % len(FAILURES)]
        streams = [new_stream() for _ in range(3)]
        moved, taken = new_stream("moved"), f"taken-{new_stream()}"
        earlier = {"first-event": streams[0], "last-event": streams[2]}.get(failing)
        recorder.insert_events(
            [event(moved, 1)] + ([event(earlier, 1, b"earlier")] if earlier else []),
            lookups=[Lookup(taken, {"k": "v"})],
        )
        fresh = f"fresh-{streams[0]}"
        with pytest.raises((StreamConflictError, LookupConflictError)) as caught:
            recorder.insert_events(
                [event(s, 1) for s in streams],
                read_checks=[ReadCheck(moved, 0 if failing == "read-set" else 1)],
                lookups=[
                    Lookup(taken if failing == "lookup" else fresh, {"k": "new"}),
                    Lookup(f"also-{streams[1]}", {}),
                ],
                due=[DueWork(f"att-{streams[1]}", at(1))],
            )
        named = getattr(caught.value, "stream_id", None) or caught.value.key  # type: ignore[attr-defined]
        assert named == {"read-set": moved, "lookup": taken}.get(failing, earlier)
        keys = [it.event_key(s, 1) for s in streams if s != earlier]
        keys += [it.lookup_key(fresh), it.lookup_key(f"also-{streams[1]}")]
        keys += [it.due_key(f"att-{streams[1]}")]
        assert existing(dynamodb_client, dynamodb_table_name, keys) == [False] * len(keys)
        assert recorder.get_lookup(taken) == {"k": "v"}
        if earlier:
            assert [e.state for e in recorder.select_events(earlier)] == [b"earlier"]
