"""Events stored by earlier code keep their hashes: chains, heads and digests verify.

``fixtures/ledger_before_one_pass_hashing.json`` holds every stored row, the
head index and an audit digest of a small ledger recorded by the code before an
event's canonical bytes became its stored state (the commit is named in the
file): four lifecycles, one of them with content whose keys sort differently by
UTF-16 code units (RFC 8785) than by code points, control characters and the
largest safe integers, and one declined proposal. Loading the rows as they are
and checking them with today's code must find nothing, and events appended
today must extend those chains.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from adapters.audit.digests import prove, verify_consistency, verify_ledger
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from adapters.system import SystemClock
from domain.audit import verify_chain
from domain.digest import Digest, build_digest
from domain.directory import DirectoryKind, actor_record_id
from domain.ports import StreamHead
from domain.proofs import check_proof
from domain.services.directory import put_record
from domain.spec import format_utc

FIXTURE = Path(__file__).parent / "fixtures" / "ledger_before_one_pass_hashing.json"


def fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    """The recorded rows written as they are, with the head index recorded beside them."""
    data = fixture()
    if request.param == "sqlite":
        recorder: Any = SQLiteLedgerRecorder(open_datastore(str(tmp_path / "ledger.db")))
        recorder.create_table()
    else:
        recorder = MemoryLedgerRecorder()
    heads = {h["stream"]: StreamHead(h["stream"], h["version"], h["head"]) for h in data["heads"]}
    by_stream: dict[str, list[StoredEvent]] = {}
    for row in data["events"]:
        by_stream.setdefault(row["stream"], []).append(
            StoredEvent(
                originator_id=row["stream"],
                originator_version=row["version"],
                topic=row["topic"],
                state=row["state"].encode("utf-8"),
            )
        )
    for stream_id, events in by_stream.items():
        recorder.insert_events(events, heads=[heads[stream_id]])
    yield LedgerStore(recorder)
    if request.param == "sqlite":
        recorder.close()


def test_the_fixture_covers_the_canonicalization_edges() -> None:
    states = "".join(row["state"] for row in fixture()["events"])
    assert "\U0001f600" in states and "\ue000" in states  # UTF-16 order != code point order
    assert "\\u0000" in states and "\\u001f" in states  # control characters, escaped
    assert str(2**53 - 1) in states


def test_a_digest_taken_by_earlier_code_verifies(store: LedgerStore) -> None:
    verdict = verify_ledger(store, Digest.from_json(fixture()["digest"]))
    assert verdict.ok, verdict.message


def test_every_stream_hashes_to_its_recorded_head(store: LedgerStore) -> None:
    for head in fixture()["heads"]:
        events, undecodable = store.audit_events(head["stream"])
        assert undecodable is None
        check = verify_chain(head["stream"], events, (head["version"], head["head"]))
        assert check.ok, (head["stream"], check)
        assert events[-1].hash() == head["head"]


def test_events_appended_today_extend_the_recorded_chains(store: LedgerStore) -> None:
    old = Digest.from_json(fixture()["digest"])
    record = actor_record_id("actor0")
    put_record(
        store, SystemClock(), kind=DirectoryKind.ACTOR, record_id=record, values={"enabled": False}
    )
    events, undecodable = store.audit_events(record)
    assert undecodable is None and len(events) == 2
    assert verify_chain(record, events).ok
    new = build_digest(old.ledger, format_utc(datetime.now(UTC)), store.stream_heads())
    assert new.heads != old.heads
    assert verify_ledger(store, new).ok
    verdict = verify_consistency(store, old, new)
    assert verdict.ok, verdict.message


def test_proofs_of_older_events_hold_and_their_chain_is_the_stored_bodies(
    store: LedgerStore,
) -> None:
    digest = Digest.from_json(fixture()["digest"])
    for head in fixture()["heads"]:
        proof = prove(store, digest, head["stream"], 1)
        assert check_proof(proof, digest) is None, head["stream"]
        assert proof["head"] == head["head"]
