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
from datetime import datetime
from itertools import takewhile
from pathlib import Path
from typing import Any

from adapters.audit import signing
from adapters.settings import Settings
from adapters.store import LedgerStore
from domain.audit import verify_chain
from domain.digest import (
    DELETED,
    TRUNCATED,
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
from domain.restore import RESTORE_LOG_ID
from domain.spec import format_utc, parse_utc


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
class Behind:
    """A ledger behind a digest and nothing else: streams that lost their newest
    events or are missing, every remaining event as the digest recorded it. What
    restoring an older backup leaves (I17)."""

    digest_created_at: str
    truncated: tuple[tuple[str, int, int], ...]  # (stream, events in the digest, now)
    missing: tuple[tuple[str, int], ...]  # (stream, events in the digest)

    @property
    def events_lost(self) -> int:
        return sum(then - now for _, then, now in self.truncated) + sum(
            then for _, then in self.missing
        )

    def summary(self) -> dict[str, Any]:
        """Counts only (no stream id): what a restore marker keeps."""
        return {
            "digest_created_at": self.digest_created_at,
            "streams_behind": len(self.truncated),
            "streams_missing": len(self.missing),
            "events_lost": self.events_lost,
        }

    def message(self) -> str:
        return (
            f"the ledger is behind the digest of {self.digest_created_at}: "
            f"{len(self.truncated)} streams lost their newest events and "
            f"{len(self.missing)} are missing ({self.events_lost} events), "
            f"as restoring an older backup leaves it"
        )

    def lines(self) -> list[str]:
        """One line per stream the ledger lost, by stream id."""
        found = [
            (stream, f"{stream}: {then} events in the digest, {now} now ({then - now} lost)")
            for stream, then, now in self.truncated
        ]
        found += [
            (stream, f"{stream}: missing ({then} events in the digest)")
            for stream, then in self.missing
        ]
        return [line for _, line in sorted(found)]


@dataclass(frozen=True)
class Verdict:
    """What a verification found: nothing (``ok``), the first problem, or (``behind``)
    every stream a restore of an older state lost."""

    ok: bool
    message: str
    finding: Finding | None = None
    behind: Behind | None = None


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


@dataclass(frozen=True)
class RestoreMark:
    """A restore recorded after a digest was taken: where the restored store's own
    history resumes (the timestamp of the event that recorded it)."""

    restore_id: str
    source: str
    at: str
    resumed: datetime


def restore_since(store: LedgerStore, digest: Digest) -> RestoreMark | None:
    """The first restore the restore log recorded after ``digest`` was taken."""
    events, _ = store.audit_events(RESTORE_LOG_ID)
    for event in events:
        if type(event).__qualname__ != "RestoreLog.BackupRestored":
            continue
        data = event.data()
        if parse_utc(data["at"]) >= parse_utc(digest.created_at):
            return RestoreMark(data["restore_id"], data["source"], data["at"], event.timestamp)
    return None


def restore_note(store: LedgerStore, digest: Digest) -> str:
    """What the restore log says of a ledger behind ``digest``."""
    mark = restore_since(store, digest)
    if mark is None:
        return "no restore is recorded since the digest: a truncation or an unrecorded restore"
    return f"restore {mark.restore_id} ({mark.source}) was recorded at {mark.at}"


def verify_ledger(
    store: LedgerStore, digest: Digest, progress: Callable[[int], None] | None = None
) -> Verdict:
    """Does today's ledger extend the digest? Replays each listed stream's chain.

    The first stream rewritten or reordered ends the check (tampering). Streams
    only cut short or missing are all collected: a ledger that is merely behind
    the digest is what restoring an older backup leaves, and the verdict names
    every stream it lost (``behind``). When the restore log recorded a restore
    after the digest, each stream is judged by its events from before the
    restore (the restored point): what the ledger wrote since then may differ
    from what the restore lost, and does not hide the loss.
    """
    truncated: list[tuple[str, int, int]] = []
    missing: list[tuple[str, int]] = []
    first: Finding | None = None
    mark = restore_since(store, digest)
    for count, head in enumerate(digest.heads, start=1):
        events, undecodable = store.audit_events(head.stream_id)
        if mark is not None:
            kept = list(takewhile(lambda e: e.timestamp < mark.resumed, events))
            if len(kept) < head.version and verify_chain(head.stream_id, kept).ok:
                if kept:
                    truncated.append((head.stream_id, head.version, len(kept)))
                    first = first or Finding(head.stream_id, TRUNCATED, len(kept) + 1)
                else:
                    missing.append((head.stream_id, head.version))
                    first = first or Finding(head.stream_id, DELETED)
                continue
        finding = check_stream(head, events, undecodable)
        if finding is not None:
            if finding.reason == TRUNCATED:
                truncated.append((head.stream_id, head.version, len(events)))
            elif finding.reason == DELETED:
                missing.append((head.stream_id, head.version))
            else:
                return Verdict(False, finding.message(), finding)
            first = first or finding
        if progress is not None and count % 1000 == 0:
            progress(1000)
    if first is not None:
        behind = Behind(digest.created_at, tuple(truncated), tuple(missing))
        return Verdict(False, f"{behind.message()}; first: {first.message()}", first, behind)
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
