"""Differential test: the same random commits on memory, SQLite and DynamoDB
give the same outcomes and the same reads (the memory and SQLite recorders
are the reference semantics)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.recorder import LedgerRecorder, LookupConflictError, StreamConflictError
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from domain.ports import DueWork, Lookup, ReadCheck
from tests.support.dynamodb_events import at, event

pytestmark = pytest.mark.dynamodb

STREAMS = [f"s:{i}" for i in range(6)]


@pytest.fixture
def backends(
    dynamodb_recorder: DynamoDBLedgerRecorder, tmp_path: Path
) -> Iterator[dict[str, LedgerRecorder]]:
    sqlite = SQLiteLedgerRecorder(open_datastore(str(tmp_path / "parity.db")))
    sqlite.create_table()
    dynamodb_recorder.due_buckets = 3  # several buckets even with few entries
    yield {"memory": MemoryLedgerRecorder(), "sqlite": sqlite, "dynamodb": dynamodb_recorder}
    sqlite.close()


def outcome(recorder: LedgerRecorder, **commit: Any) -> str:
    try:
        recorder.insert_events(**commit)
    except StreamConflictError as exc:
        return f"stream:{exc.stream_id}"
    except LookupConflictError as exc:
        return f"lookup:{exc.key}"
    return "ok"


def random_commit(rng: random.Random, versions: dict[str, int], serial: int) -> dict[str, Any]:
    events: list[StoredEvent] = []
    for stream in rng.sample(STREAMS, rng.randint(0, 3)):
        start = max(1, versions[stream] + rng.choice([0, 1, 1, 1, 1]))  # some collide
        for version in range(start, start + rng.randint(1, 2)):
            events.append(event(stream, version, f"{serial}:{stream}@{version}".encode()))
    checks = [
        ReadCheck(s, versions[s] - rng.choice([0, 0, 0, 1]))
        for s in rng.sample(STREAMS, rng.randint(0, 2))
    ]
    keys = rng.sample([f"k{i}" for i in range(12)], rng.randint(0, 2))
    lookups = [Lookup(k, {"serial": str(serial)}) for k in keys]
    due = [
        DueWork(f"att-{rng.randint(0, 15)}", None if rng.random() < 0.2 else at(rng.randint(0, 20)))
        for _ in range(rng.randint(0, 3))
    ]
    return {"stored_events": events, "read_checks": checks, "lookups": lookups, "due": due}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_commits_agree_with_memory_and_sqlite(
    backends: dict[str, LedgerRecorder], seed: int
) -> None:
    rng = random.Random(seed)
    versions = dict.fromkeys(STREAMS, 0)
    for serial in range(120):
        commit = random_commit(rng, versions, serial)
        results = {name: outcome(r, **commit) for name, r in backends.items()}
        assert len(set(results.values())) == 1, (serial, commit, results)
        if results["memory"] == "ok":
            for e in commit["stored_events"]:
                versions[e.originator_id] = max(versions[e.originator_id], e.originator_version)

    def reads(recorder: LedgerRecorder, rng: random.Random) -> list[Any]:
        seen: list[Any] = []
        for stream in STREAMS:
            for _ in range(8):
                options: dict[str, Any] = {
                    "gt": rng.choice([None, 0, 1, 3]),
                    "lte": rng.choice([None, 2, 4, 9]),
                    "desc": rng.random() < 0.5,
                    "limit": rng.choice([None, 1, 2, 5]),
                }
                rows = recorder.select_events(stream, **options)
                seen.append([(e.originator_version, e.state) for e in rows])
        seen.append([recorder.get_lookup(f"k{i}") for i in range(12)])
        for upto, limit in [(20, 100), (20, 3), (7, 2), (0, 1)]:
            cursor, pages = None, []
            while True:
                page, cursor = recorder.select_due(at(upto), limit, cursor)
                pages.append([(d.attempt_id, d.next_action_at) for d in page])
                if cursor is None:
                    break
            seen.append(pages)
        return seen

    expected = reads(backends["memory"], random.Random(seed))
    assert reads(backends["sqlite"], random.Random(seed)) == expected
    assert reads(backends["dynamodb"], random.Random(seed)) == expected
