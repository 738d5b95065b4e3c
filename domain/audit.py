"""Verification of a stream's hash chain (tamper evidence, I9).

Each event names its predecessor's hash; the first names the stream's genesis
hash. Replaying the chain finds the first version whose link is broken: an
edited, removed, reordered or inserted event. The last event has no successor
to vouch for it, so callers pass an *anchor* (a version and the hash recorded
for it elsewhere, e.g. in the status view) to cover the head too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain.base import LedgerEvent, genesis_hash


@dataclass(frozen=True)
class ChainCheck:
    """The verdict: ``ok``, or the first bad version and a short reason code."""

    ok: bool
    first_bad_version: int | None = None
    reason: str | None = None


def verify_chain(
    stream_id: str,
    events: Sequence[LedgerEvent],
    anchor: tuple[int, str] | None = None,
) -> ChainCheck:
    """Check versions, links and the anchor; stop at the first problem."""
    expected_prev = genesis_hash(stream_id)
    hashes: dict[int, str] = {}
    for position, event in enumerate(events, start=1):
        if event.originator_id != stream_id:
            return ChainCheck(False, position, "foreign_event")
        if event.originator_version != position:
            return ChainCheck(False, position, "version_gap")
        if getattr(event, "prev_hash", None) != expected_prev:
            return ChainCheck(False, position, "broken_link")
        expected_prev = event.hash()
        hashes[position] = expected_prev
    if anchor is not None:
        version, recorded = anchor
        if version > len(events):
            return ChainCheck(False, len(events) + 1, "missing_events")
        if hashes[version] != recorded:
            return ChainCheck(False, version, "anchor_mismatch")
    return ChainCheck(True)
