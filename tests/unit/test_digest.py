"""Digests over the in-memory store: the head index, checks, proofs, consistency."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from adapters.audit import digests, signing
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.settings import load_settings
from adapters.store import LedgerStore
from domain.digest import Digest, build_digest, check_stream
from domain.directory import DirectoryRecord
from domain.errors import DigestInvalid
from domain.ports import Commit, StreamHead
from domain.proofs import check_proof
from tests.support.clocks import FixedClock

AT = "2026-01-01T12:00:00Z"
LEDGER = "memory"


def grow(store: LedgerStore, rid: str, n: int) -> None:
    record = store.get(DirectoryRecord, rid)
    if record is None:
        record = DirectoryRecord(record_id=rid, kind="actor", values={"i": 0}, at=AT)
        n -= 1
    start = record.values["i"]
    for i in range(start + 1, start + 1 + n):
        record.update({"i": i}, AT)
    store.commit(Commit(aggregates=[record]))


@pytest.fixture
def store() -> LedgerStore:
    s = LedgerStore(MemoryLedgerRecorder())
    for rid, n in [("actor:b", 3), ("actor:a", 1), ("target:x", 5)]:
        grow(s, rid, n)
    return s


def settings(**extra: Any) -> Any:
    return load_settings(store="memory", **extra)


def test_the_head_index_moves_with_every_commit(store: LedgerStore) -> None:
    heads = list(store.stream_heads())
    assert [(h.stream_id, h.version) for h in heads] == [
        ("actor:a", 1),
        ("actor:b", 3),
        ("target:x", 5),
    ]
    record = store.get(DirectoryRecord, "actor:b")
    assert record is not None and heads[1].head == record.chain_head
    grow(store, "actor:b", 2)
    assert [h.version for h in store.stream_heads()] == [1, 5, 5]


def test_an_untouched_ledger_with_more_events_extends_its_digest(store: LedgerStore) -> None:
    digest = digests.take_digest(settings(), store, FixedClock())
    assert digest.stream_count == 3 and digest.root_matches_heads()
    assert digests.verify_ledger(store, digest).ok
    grow(store, "actor:a", 4)
    grow(store, "actor:new", 2)
    assert digests.verify_ledger(store, digest).ok
    later = digests.take_digest(settings(), store, FixedClock())
    assert later.root != digest.root
    assert digests.verify_consistency(store, digest, later).ok


def test_consistency_names_a_stream_the_newer_digest_lost(store: LedgerStore) -> None:
    old = digests.take_digest(settings(), store, FixedClock())
    fewer = build_digest(old.ledger, "later", [h for h in old.heads if h.stream_id != "actor:b"])
    verdict = digests.verify_consistency(store, old, fewer)
    assert not verdict.ok and "actor:b was deleted" in verdict.message
    shorter = build_digest(
        old.ledger,
        "later",
        [
            StreamHead(h.stream_id, h.version - 1, h.head) if h.stream_id == "target:x" else h
            for h in old.heads
        ],
    )
    assert "target:x was truncated" in digests.verify_consistency(store, old, shorter).message
    forked = build_digest(
        old.ledger,
        "later",
        [
            StreamHead(h.stream_id, h.version + 1, "sha256:" + "0" * 64)
            if h.stream_id == "actor:a"
            else h
            for h in old.heads
        ],
    )
    grow(store, "actor:a", 1)
    assert "actor:a was rewritten" in digests.verify_consistency(store, old, forked).message


def test_check_stream_names_what_happened(store: LedgerStore) -> None:
    digest = digests.take_digest(settings(), store, FixedClock())
    head = digest.heads[2]
    events, _ = store.audit_events("target:x")
    assert check_stream(head, events) is None
    assert check_stream(head, []).reason == "deleted"  # type: ignore[union-attr]
    cut = check_stream(head, events[:3])
    assert cut is not None and (cut.reason, cut.version) == ("truncated", 4)
    swapped = [events[0], events[2], events[1], *events[3:]]
    found = check_stream(head, swapped)
    assert found is not None and found.reason == "reordered"
    found = check_stream(head, [*events[:2], *events[3:]])
    assert found is not None and found.reason == "rewritten"
    other = StreamHead(head.stream_id, head.version, "sha256:" + "1" * 64)
    assert check_stream(other, events).reason == "rewritten"  # type: ignore[union-attr]


def test_a_proof_checks_offline_and_fails_when_anything_changes(store: LedgerStore) -> None:
    digest = digests.take_digest(settings(), store, FixedClock())
    proof = digests.prove(store, digest, "target:x", 2)
    assert len(proof["chain"]) == 4 and len(proof["merkle_path"]) == 1
    assert check_proof(proof, digest) is None
    assert check_proof(proof) is None
    for change in (
        lambda p: p["chain"][1]["data"].update(values={"i": 99}),
        lambda p: p.update(head="sha256:" + "2" * 64),
        lambda p: p.update(leaf_index=0),
        lambda p: p["chain"].pop(),
        lambda p: p.update(merkle_path=["sha256:" + "3" * 64]),
    ):
        forged = copy.deepcopy(proof)
        change(forged)
        assert check_proof(forged, digest) is not None
    other = build_digest(digest.ledger, "x", digest.heads[:2])
    assert check_proof(proof, other) is not None
    with pytest.raises(DigestInvalid):
        check_proof({"format": "nope"})


def test_signed_digest_round_trip_forgery_and_another_key(
    store: LedgerStore, tmp_path: Path
) -> None:
    key, other = tmp_path / "key.pem", tmp_path / "other.pem"
    for path in (key, other):
        path.write_bytes(
            Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    config = settings(audit_signing_key=str(key))
    digest = digests.take_digest(config, store, FixedClock())
    parsed = Digest.from_json(digest.to_json())
    assert parsed == digest and parsed.signature is not None
    assert digests.check_digest_itself(config, parsed, None, LEDGER) is None
    data = digest.to_json()
    data["streams"][0][1] += 1  # the file edited; the root no longer matches
    verdict = digests.check_digest_itself(config, Digest.from_json(data), None, LEDGER)
    assert verdict is not None and "do not hash to its root" in verdict.message
    data = digest.to_json()
    data["created_at"] = "2030-01-01T00:00:00Z"  # a signed field edited
    verdict = digests.check_digest_itself(config, Digest.from_json(data), None, LEDGER)
    assert verdict is not None and "signature does not verify" in verdict.message
    with pytest.raises(DigestInvalid, match="another key"):
        digests.check_digest_itself(config, digest, str(other), LEDGER)
    with pytest.raises(DigestInvalid, match="not this one"):
        digests.check_digest_itself(settings(), digest, str(key), "elsewhere")
    with pytest.raises(DigestInvalid, match="pass --public-key"):
        digests.check_digest_itself(settings(), digest, None, LEDGER)
    assert signing.key_id(signing.load_public_key(str(key))) == digest.signature.key_id


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"format": "execution-ledger/digest/v1"},
        [],
        {
            "format": "execution-ledger/digest/v1",
            "ledger": "m",
            "created_at": "t",
            "root": "sha256:" + "0" * 64,
            "stream_count": 1,
            "streams": [["a", 0, "x"]],
        },
        {
            "format": "execution-ledger/digest/v1",
            "ledger": "m",
            "created_at": "t",
            "root": "sha256:" + "0" * 64,
            "stream_count": 2,
            "streams": [["b", 1, "sha256:" + "0" * 64], ["a", 1, "sha256:" + "0" * 64]],
        },
    ],
)
def test_malformed_digests_are_refused_with_one_line(bad: Any) -> None:
    with pytest.raises(DigestInvalid) as info:
        Digest.from_json(bad)
    assert "\n" not in str(info.value)
