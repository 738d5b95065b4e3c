"""Audit digests: one Merkle root over the head of every stream (design.md 5.11).

A digest lists every stream's head (stream id, version, hash of its newest
event) sorted by stream id, and the RFC 6962-style Merkle root over them.
Kept somewhere the ledger's writers cannot reach, it lets a later check prove
that today's ledger *extends* it: every stream it lists is still there and its
hash chain, replayed up to the recorded version, still ends at the recorded
head. Whatever was edited, deleted, reordered, inserted or cut off since then
breaks either a link or the head, and the check names the first such stream.

Signing is not done here (an adapter signs ``Digest.statement()``); this
module only carries the signature.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from domain.audit import verify_chain
from domain.base import LedgerEvent, event_hash, genesis_hash
from domain.canonical import canonical_json
from domain.errors import DigestInvalid
from domain.merkle import leaf_hash, merkle_root
from domain.ports import StreamHead

DIGEST_FORMAT = "execution-ledger/digest/v1"
LEAF_LABEL = "execution-ledger/digest-leaf/v1"
HASH_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")


def head_leaf(head: StreamHead) -> bytes:
    """The Merkle leaf hash of one stream head (stream id, version, chain head)."""
    return leaf_hash(canonical_json([LEAF_LABEL, head.stream_id, head.version, head.head]))


def hash_text(value: bytes) -> str:
    return "sha256:" + value.hex()


def hash_bytes(text: object, what: str) -> bytes:
    if not isinstance(text, str) or not HASH_PATTERN.match(text):
        raise DigestInvalid(f"{what} is not a sha256:<64 hex> hash")
    return bytes.fromhex(text.removeprefix("sha256:"))


@dataclass(frozen=True)
class Signature:
    """An Ed25519 signature over ``Digest.statement()``, base64, and its key's id."""

    alg: str
    key_id: str
    value: str


@dataclass(frozen=True)
class Digest:
    """Every stream head at one moment, their Merkle root, and maybe a signature."""

    ledger: str
    created_at: str
    heads: tuple[StreamHead, ...]
    root: str
    signature: Signature | None = None
    _index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def stream_count(self) -> int:
        return len(self.heads)

    def statement(self) -> bytes:
        """The canonical bytes a signature covers (the root commits to every head)."""
        return canonical_json(
            {
                "format": DIGEST_FORMAT,
                "ledger": self.ledger,
                "created_at": self.created_at,
                "stream_count": self.stream_count,
                "root": self.root,
            }
        )

    def root_matches_heads(self) -> bool:
        """True when the listed heads hash to the recorded root."""
        return hash_text(merkle_root([head_leaf(h) for h in self.heads])) == self.root

    def index_of(self, stream_id: str) -> int | None:
        if not self._index:
            self._index.update({h.stream_id: i for i, h in enumerate(self.heads)})
        return self._index.get(stream_id)

    def signed(self, signature: Signature) -> Digest:
        return Digest(self.ledger, self.created_at, self.heads, self.root, signature)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "format": DIGEST_FORMAT,
            "ledger": self.ledger,
            "created_at": self.created_at,
            "stream_count": self.stream_count,
            "root": self.root,
        }
        if self.signature is not None:
            body["signature"] = {
                "alg": self.signature.alg,
                "key_id": self.signature.key_id,
                "value": self.signature.value,
            }
        body["streams"] = [[h.stream_id, h.version, h.head] for h in self.heads]
        return body

    @classmethod
    def from_json(cls, data: object) -> Digest:
        """Parse a digest; anything malformed raises ``DigestInvalid`` with one line."""
        if not isinstance(data, Mapping) or data.get("format") != DIGEST_FORMAT:
            raise DigestInvalid(f"not a ledger digest (format {DIGEST_FORMAT} expected)")
        ledger, created_at = data.get("ledger"), data.get("created_at")
        if not isinstance(ledger, str) or not isinstance(created_at, str):
            raise DigestInvalid("digest lacks its ledger or created_at")
        root = data.get("root")
        hash_bytes(root, "digest root")
        streams = data.get("streams")
        if not isinstance(streams, list) or data.get("stream_count") != len(streams):
            raise DigestInvalid("digest streams do not match its stream_count")
        heads = tuple(_parse_head(row) for row in streams)
        for before, after in pairwise(heads):
            if not before.stream_id < after.stream_id:
                raise DigestInvalid("digest streams are not sorted by stream id")
        signature = None
        raw = data.get("signature")
        if raw is not None:
            if not isinstance(raw, Mapping) or not all(
                isinstance(raw.get(k), str) for k in ("alg", "key_id", "value")
            ):
                raise DigestInvalid("digest signature is malformed")
            signature = Signature(str(raw["alg"]), str(raw["key_id"]), str(raw["value"]))
        return cls(ledger, created_at, heads, str(root), signature)


def _parse_head(row: object) -> StreamHead:
    if (
        not isinstance(row, list)
        or len(row) != 3
        or not isinstance(row[0], str)
        or not row[0]
        or type(row[1]) is not int
        or row[1] < 1
    ):
        raise DigestInvalid("digest stream entries must be [stream id, version, head]")
    hash_bytes(row[2], "stream head")
    return StreamHead(row[0], row[1], row[2])


def build_digest(ledger: str, created_at: str, heads: Iterable[StreamHead]) -> Digest:
    """The digest of these heads: sorted by stream id, one per stream."""
    ordered = tuple(sorted(heads, key=lambda h: h.stream_id))
    for before, after in pairwise(ordered):
        if before.stream_id == after.stream_id:
            raise ValueError(f"two heads for stream {before.stream_id}")
    root = hash_text(merkle_root([head_leaf(h) for h in ordered]))
    return Digest(ledger, created_at, ordered, root)


# -- checking a stream against its recorded head ----------------------------------

DELETED = "deleted"
TRUNCATED = "truncated"
REWRITTEN = "rewritten"
REORDERED = "reordered"


@dataclass(frozen=True)
class Finding:
    """The first problem of one stream: what happened and from which version."""

    stream_id: str
    reason: str
    version: int | None = None
    detail: str = ""

    def message(self) -> str:
        where = f" at version {self.version}" if self.version is not None else ""
        extra = f" ({self.detail})" if self.detail else ""
        return f"stream {self.stream_id} was {self.reason}{where}{extra}"


def check_stream(
    head: StreamHead, events: Sequence[LedgerEvent], undecodable: int | None = None
) -> Finding | None:
    """Does this stream's chain, up to the recorded version, still end at the head?

    ``events`` are the stream's decoded events from version 1, possibly more
    than the digest recorded (a stream that grew since still extends it, but
    its newer events must still link); ``undecodable`` is the first version
    whose stored bytes did not decode.
    """
    sid = head.stream_id
    if not events and undecodable is None:
        return Finding(sid, DELETED)
    # The recorded head is checked as the chain's anchor: every event is hashed once.
    anchor = (head.version, head.head) if len(events) >= head.version else None
    chain = verify_chain(sid, events, anchor)
    bad = None if chain.ok else chain.first_bad_version
    if undecodable is not None and (bad is None or undecodable < bad):
        return Finding(sid, REWRITTEN, undecodable, "stored bytes do not decode")
    if chain.reason == "anchor_mismatch":
        return Finding(sid, REWRITTEN, head.version, "head differs from the digest")
    if bad is not None and bad <= head.version:
        if is_reordering(sid, events):
            return Finding(sid, REORDERED, bad)
        return Finding(sid, REWRITTEN, bad, (chain.reason or "").replace("_", " "))
    if len(events) < head.version:
        missing = head.version - len(events)
        return Finding(
            sid,
            TRUNCATED,
            len(events) + 1,
            f"{missing} newest event{'s' if missing > 1 else ''} missing",
        )
    if bad is not None:  # broken after the recorded version: the anchor was not reached
        if events[head.version - 1].hash() != head.head:
            return Finding(sid, REWRITTEN, head.version, "head differs from the digest")
        return Finding(sid, REWRITTEN, bad, "an event after the digest does not link")
    return None


def is_reordering(stream_id: str, events: Sequence[LedgerEvent]) -> bool:
    """True when the same events, put in another order, would form a valid chain."""
    remaining = list(events)
    expected = genesis_hash(stream_id)
    order: list[LedgerEvent] = []
    for position in range(1, len(events) + 1):
        found = next((e for e in remaining if getattr(e, "prev_hash", None) == expected), None)
        if found is None:
            return False
        remaining.remove(found)
        order.append(found)
        expected = event_hash(
            stream_id, position, type(found).__qualname__, found.timestamp, found.data()
        )
    return [id(e) for e in order] != [id(e) for e in events]


def check_segment(
    old: StreamHead, new: StreamHead, events: Sequence[LedgerEvent]
) -> Finding | None:
    """Do the events after ``old.version`` lead from ``old.head`` to ``new.head``?"""
    expected = old.head
    wanted = list(range(old.version + 1, new.version + 1))
    if [e.originator_version for e in events] != wanted:
        return Finding(
            new.stream_id, REWRITTEN, old.version + 1, "events between the two digests are missing"
        )
    for event in events:
        if getattr(event, "prev_hash", None) != expected:
            return Finding(
                new.stream_id,
                REWRITTEN,
                event.originator_version,
                "the newer digest does not extend the older",
            )
        expected = event.hash()
    if expected != new.head:
        return Finding(new.stream_id, REWRITTEN, new.version, "head differs from the digest")
    return None


def compare_digests(
    old: Digest, new: Digest
) -> tuple[Finding | None, list[tuple[StreamHead, StreamHead]]]:
    """Compare two digests head by head.

    Returns the first problem found from the digests alone, and the streams
    that grew in between (their new events must be checked against the
    ledger with :func:`check_segment`).
    """
    grown: list[tuple[StreamHead, StreamHead]] = []
    for head in old.heads:
        index = new.index_of(head.stream_id)
        if index is None:
            return Finding(head.stream_id, DELETED, None, "absent from the newer digest"), grown
        later = new.heads[index]
        if later.version < head.version:
            return Finding(
                head.stream_id,
                TRUNCATED,
                later.version + 1,
                "the newer digest records fewer events",
            ), grown
        if later.version == head.version:
            if later.head != head.head:
                return Finding(
                    head.stream_id, REWRITTEN, head.version, "the newer digest records another head"
                ), grown
            continue
        grown.append((head, later))
    return None, grown
