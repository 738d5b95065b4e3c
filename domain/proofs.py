"""Inclusion proofs: one event of one stream is covered by a digest's root.

A proof has two parts. The *chain path* is the canonical body of the proven
event and of every later event up to the head the digest recorded: each body
names its predecessor's hash, and hashing the last one gives the head. The
*Merkle path* takes that head's leaf to the digest root with at most
``ceil(log2 n)`` sibling hashes. Checking needs the proof and the digest only,
never the ledger.

The chain path carries the event bodies exactly as hashed, so a proof is as
confidential as the stream it comes from (see docs/audit.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from domain.base import LedgerEvent
from domain.canonical import canonical_json
from domain.digest import Digest, hash_bytes, hash_text, head_leaf
from domain.errors import DigestInvalid
from domain.merkle import inclusion_path, root_from_path
from domain.ports import StreamHead

PROOF_FORMAT = "execution-ledger/proof/v1"


def event_body(event: LedgerEvent) -> dict[str, Any]:
    """The exact object an event's hash is computed over (see ``domain.base.event_body``)."""
    return event.body()


def body_hash(body: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(dict(body))).hexdigest()


def make_proof(
    digest: Digest, stream_id: str, version: int, events: Sequence[LedgerEvent]
) -> dict[str, Any]:
    """The proof that ``(stream_id, version)`` is covered by ``digest``.

    ``events`` are the stream's events from ``version`` up to (at least) the
    version the digest recorded; the caller has already checked the stream
    against the digest.
    """
    index = digest.index_of(stream_id)
    if index is None:
        raise DigestInvalid(f"stream {stream_id} is not in the digest")
    head = digest.heads[index]
    if not 1 <= version <= head.version:
        raise DigestInvalid(
            f"the digest covers versions 1..{head.version} of {stream_id}, not {version}"
        )
    chain = [event_body(e) for e in events if version <= e.originator_version <= head.version]
    leaves = [head_leaf(h) for h in digest.heads]
    return {
        "format": PROOF_FORMAT,
        "ledger": digest.ledger,
        "digest_root": digest.root,
        "digest_created_at": digest.created_at,
        "stream_count": digest.stream_count,
        "stream": stream_id,
        "version": version,
        "event_hash": body_hash(chain[0]) if chain else None,
        "head_version": head.version,
        "head": head.head,
        "leaf_index": index,
        "merkle_path": [hash_text(h) for h in inclusion_path(leaves, index)],
        "chain": chain,
    }


def check_proof(proof: object, digest: Digest | None = None) -> str | None:
    """None when the proof holds (against ``digest`` if given), else why not.

    A proof that is not even shaped like one raises ``DigestInvalid``.
    """
    if not isinstance(proof, Mapping) or proof.get("format") != PROOF_FORMAT:
        raise DigestInvalid(f"not an inclusion proof (format {PROOF_FORMAT} expected)")
    try:
        stream = str(proof["stream"])
        version, head_version = int(proof["version"]), int(proof["head_version"])
        head, root = str(proof["head"]), str(proof["digest_root"])
        index, size = int(proof["leaf_index"]), int(proof["stream_count"])
        path = [hash_bytes(p, "merkle path entry") for p in proof["merkle_path"]]
        chain = list(proof["chain"])
        root_value = hash_bytes(root, "digest root")
    except (KeyError, TypeError, ValueError) as exc:
        raise DigestInvalid("the proof is missing a field or has a wrong type") from exc
    if digest is not None:
        if proof.get("ledger") != digest.ledger:
            return "the proof is for another ledger than the digest"
        if root != digest.root or size != digest.stream_count:
            return "the proof is for another digest (root or stream count differ)"
    expected_versions = list(range(version, head_version + 1))
    if [b.get("version") if isinstance(b, Mapping) else None for b in chain] != expected_versions:
        return "the chain path does not run from the event to the recorded head"
    previous: str | None = None
    for body in chain:
        if body.get("stream") != stream or not isinstance(body.get("data"), Mapping):
            return f"chain path entry {body.get('version')} is not an event of {stream}"
        if previous is not None and body["data"].get("prev_hash") != previous:
            return f"chain path breaks at version {body['version']}"
        previous = body_hash(body)
    if previous != head:
        return "the chain path does not end at the recorded head"
    if proof.get("event_hash") != body_hash(chain[0]):
        return "the proof's event hash is not the hash of its event"
    leaf = head_leaf(StreamHead(stream, head_version, head))
    if root_from_path(leaf, index, size, path) != root_value:
        return "the Merkle path does not lead to the digest root"
    return None
