"""Audit digests over a ledger: take one, check the ledger against one, prove an
event, compare two, write a checkpoint. The tree and the checks are pure domain
code (:mod:`domain.digest`, :mod:`domain.proofs`); this module feeds them from
the store's head index and events, and signs with :mod:`adapters.audit.signing`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.audit import signing
from adapters.settings import Settings
from adapters.store import LedgerStore
from domain.digest import (
    Digest,
    Finding,
    build_digest,
    check_segment,
    check_stream,
    compare_digests,
)
from domain.errors import DigestInvalid
from domain.ports import Clock
from domain.proofs import make_proof
from domain.spec import format_utc


def take_digest(settings: Settings, store: LedgerStore, clock: Clock) -> Digest:
    """The digest of the head index now, signed when a signing key is configured."""
    digest = build_digest(settings.ledger_id, format_utc(clock.now()), store.stream_heads())
    if settings.audit_signing_key:
        digest = signing.sign(digest, signing.load_private_key(settings.audit_signing_key))
    return digest


def digest_text(digest: Digest) -> str:
    return json.dumps(digest.to_json(), separators=(",", ":")) + "\n"


def read_json(path: str, what: str) -> Any:
    """A JSON file, or one clear line saying why not."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise DigestInvalid(f"{what} {path}: cannot read it ({reason})") from None
    try:
        return json.loads(text)
    except ValueError:
        raise DigestInvalid(f"{what} {path}: not JSON") from None


def load_digest(path: str) -> Digest:
    return Digest.from_json(read_json(path, "digest"))


@dataclass(frozen=True)
class Verdict:
    """What a verification found: nothing (``ok``) or the first problem."""

    ok: bool
    message: str
    finding: Finding | None = None


def check_digest_itself(
    settings: Settings, digest: Digest, public_key: str | None, ledger_id: str | None
) -> Verdict | None:
    """Signature first, then the digest's own consistency, then (when ``ledger_id``
    is given) that it is this ledger's.

    Raises ``DigestInvalid`` (bad input: another key, another ledger, no key to
    check a signed digest); returns a failed verdict when the digest was altered.
    """
    key_path = public_key or settings.audit_signing_key
    if key_path is not None:
        what = "--public-key" if public_key else "LEDGER_AUDIT_SIGNING_KEY"
        if not signing.signature_holds(digest, signing.load_public_key(key_path, what)):
            return Verdict(
                False,
                "the digest signature does not verify: "
                "the digest was altered or its signature forged",
            )
    elif digest.signature is not None:
        raise DigestInvalid(
            "the digest is signed: pass --public-key (or set "
            "LEDGER_AUDIT_SIGNING_KEY) to check its signature"
        )
    if not digest.root_matches_heads():
        return Verdict(
            False, "the digest's streams do not hash to its root: the digest file was altered"
        )
    if ledger_id is not None and digest.ledger != ledger_id:
        raise DigestInvalid(
            f"the digest is for ledger {digest.ledger!r}, not this one ({ledger_id!r})"
        )
    return None


def verify_ledger(
    store: LedgerStore, digest: Digest, progress: Callable[[int], None] | None = None
) -> Verdict:
    """Does today's ledger extend the digest? Replays each listed stream's chain."""
    for count, head in enumerate(digest.heads, start=1):
        events, undecodable = store.audit_events(head.stream_id)
        finding = check_stream(head, events, undecodable)
        if finding is not None:
            return Verdict(False, finding.message(), finding)
        if progress is not None and count % 1000 == 0:
            progress(1000)
    return Verdict(
        True,
        f"the ledger extends the digest of {digest.created_at}: "
        f"{digest.stream_count} streams, root {digest.root}",
    )


def verify_consistency(store: LedgerStore, old: Digest, new: Digest) -> Verdict:
    """Does ``new`` extend ``old``? Unchanged heads are compared directly; for a
    stream that grew, the events in between are read and their links checked."""
    finding, grown = compare_digests(old, new)
    if finding is not None:
        return Verdict(False, finding.message(), finding)
    for before, after in grown:
        events, undecodable = store.audit_events(
            before.stream_id, gt=before.version, lte=after.version
        )
        if undecodable is not None:
            finding = Finding(
                before.stream_id, "rewritten", undecodable, "stored bytes do not decode"
            )
        else:
            finding = check_segment(before, after, events)
        if finding is not None:
            return Verdict(False, finding.message(), finding)
    return Verdict(
        True,
        f"the digest of {new.created_at} extends the digest of "
        f"{old.created_at}: {old.stream_count} streams then, "
        f"{new.stream_count} now, {len(grown)} grew",
    )


def prove(store: LedgerStore, digest: Digest, stream_id: str, version: int) -> dict[str, Any]:
    """An inclusion proof of one event, after checking its stream against the digest."""
    index = digest.index_of(stream_id)
    if index is None:
        raise DigestInvalid(f"stream {stream_id} is not in the digest")
    head = digest.heads[index]
    events, undecodable = store.audit_events(stream_id, lte=head.version)
    finding = check_stream(head, events, undecodable)
    if finding is not None:
        raise TamperingFound(finding.message())
    return make_proof(digest, stream_id, version, events)


class TamperingFound(Exception):
    """The ledger does not extend the digest (the message names the stream)."""


def write_checkpoint(settings: Settings, store: LedgerStore, clock: Clock, directory: str) -> Path:
    """Write a digest to ``directory`` as ``digest-<time>.json``, never overwriting."""
    digest = take_digest(settings, store, clock)
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = digest.created_at.replace(":", "").replace("-", "")
    path = folder / f"digest-{stamp}.json"
    # O_EXCL: a checkpoint is written once; a second one in the same instant fails loudly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(digest_text(digest))
    return path
