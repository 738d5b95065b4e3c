"""Directory and proposal reads from a bounded cache whose staleness never matters.

Every read served from here feeds a decision whose commit condition-checks it:
the directory records of an authorization are the read set of the approval
and of the dispatch marker (``ReadCheck``: still at the version read), and a
proposal read for a change is appended to with its version check. A stale
entry therefore cannot authorize anything: the commit that acts on it fails
with ``ConcurrencyConflict``, :func:`commit` drops every entry the commit
touched, and the step runs again on fresh reads (``retry_on_conflict``). A
stale entry can only make a check fail that would pass on fresh data, so a
refusal is confirmed on fresh reads before it is acted on (see
``authorization.authorize_confirmed`` and the worker's recheck).

Entries are immutable (a directory snapshot is a frozen mapping; a proposal
is the tuple of its frozen events, folded into a new aggregate on every read),
the number of entries is bounded (least recently used out), a missing record
is never cached, and a newer version is never replaced by an older one.
``ReadCache(0)`` caches nothing (``LEDGER_READ_CACHE_ENTRIES=0``): every read
goes to the store, as before the cache (benchmarks measure both in one run).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from domain.base import LedgerAggregate, LedgerEvent
from domain.directory import DirectoryKind, DirectoryRecord
from domain.errors import ConcurrencyConflict
from domain.ports import Commit, EventStore
from domain.proposal import Proposal, ProposalStatus

DEFAULT_ENTRIES = 4096
"""Streams kept: a directory snapshot is a few hundred bytes, a proposal a few KB."""


@dataclass(frozen=True)
class DirectorySnapshot:
    """A directory record at one version: what authorization reads, nothing mutable."""

    id: str
    version: int
    values: Mapping[str, Any]

    @classmethod
    def of(cls, record_id: str, version: int, values: Mapping[str, Any]) -> DirectorySnapshot:
        return cls(record_id, version, MappingProxyType(dict(values)))

    @classmethod
    def from_record(cls, record: DirectoryRecord) -> DirectorySnapshot:
        return cls.of(record.id, record.version, record.values)

    def flag(self, name: str) -> bool:
        """A boolean value of the record (``enabled``, ``active``, ``granted``...)."""
        return bool(self.values.get(name, False))

    def text(self, name: str) -> str:
        """A string value of the record."""
        return str(self.values.get(name, ""))


@dataclass(frozen=True)
class ProposalEntry:
    """A proposal stream as its frozen events, up to ``version``."""

    version: int
    events: tuple[LedgerEvent, ...]

    def fold(self) -> Proposal | None:
        """A new aggregate of its own: the caller may change it and commit."""
        aggregate: Any = None
        for event in self.events:
            aggregate = event.mutate(aggregate)
        return aggregate if isinstance(aggregate, Proposal) else None


Entry = DirectorySnapshot | ProposalEntry


class ReadCache:
    """A thread-safe LRU of immutable entries keyed by stream id."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES) -> None:
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self.max_entries = max_entries
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.dropped = 0

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def __bool__(self) -> bool:
        return True  # an empty cache is still a cache (``cache or default`` must not skip it)

    def __len__(self) -> int:
        with self._lock:  # a put holds one entry over the bound until it evicts
            return len(self._entries)

    def get(self, stream_id: str) -> Entry | None:
        if not self.enabled:
            return None
        with self._lock:
            entry = self._entries.get(stream_id)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(stream_id)
            self.hits += 1
            return entry

    def put(self, stream_id: str, entry: Entry) -> None:
        """Keep ``entry`` unless a newer version is already held."""
        if not self.enabled:
            return
        with self._lock:
            held = self._entries.get(stream_id)
            if held is not None and held.version > entry.version:
                self._entries.move_to_end(stream_id)
                return
            self._entries[stream_id] = entry
            self._entries.move_to_end(stream_id)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget(self, stream_ids: Iterable[str]) -> None:
        with self._lock:
            for stream_id in stream_ids:
                if self._entries.pop(stream_id, None) is not None:
                    self.dropped += 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


# -- reads -----------------------------------------------------------------


def read_directory(
    store: EventStore, cache: ReadCache, record_id: str, *, fresh: bool = False
) -> tuple[DirectorySnapshot | None, bool]:
    """(the record, whether it came from the cache); a missing record is not cached."""
    if not fresh:
        held = cache.get(record_id)
        if isinstance(held, DirectorySnapshot):
            return held, True
    record = store.get(DirectoryRecord, record_id)
    if record is None:
        return None, False
    snapshot = DirectorySnapshot.from_record(record)
    cache.put(record_id, snapshot)
    return snapshot, False


def read_directory_at(
    store: EventStore, cache: ReadCache, pins: Sequence[tuple[str, int]]
) -> dict[str, DirectorySnapshot]:
    """Directory records at the exact versions named (one batched read).

    Every directory event carries the record's complete values, so the event
    at version v is the record at v. A pin that finds no event is left out
    (the caller reads that record from its stream)."""
    if not pins:
        return {}
    found = store.events_at(pins)
    snapshots: dict[str, DirectorySnapshot] = {}
    for stream_id, version in pins:
        _remember(cache, snapshots, stream_id, found.get((stream_id, version)))
    return snapshots


def read_directory_latest(
    store: EventStore, cache: ReadCache, stream_ids: Sequence[str]
) -> tuple[dict[str, DirectorySnapshot], set[str]]:
    """The newest version of each record (one batched read), and the ids that have
    no events. Like :func:`read_directory_at`, the newest event is the record."""
    if not stream_ids:
        return {}, set()
    found = store.latest_events(stream_ids)
    snapshots: dict[str, DirectorySnapshot] = {}
    for stream_id in stream_ids:
        _remember(cache, snapshots, stream_id, found.get(stream_id))
    return snapshots, {i for i in stream_ids if i not in found}


def _remember(
    cache: ReadCache,
    snapshots: dict[str, DirectorySnapshot],
    stream_id: str,
    event: LedgerEvent | None,
) -> None:
    """A directory event read in a batch, as the record's snapshot (kept in the cache)."""
    values = getattr(event, "values", None)
    if event is None or not isinstance(values, dict):
        return
    snapshot = DirectorySnapshot.of(stream_id, event.originator_version, values)
    snapshots[stream_id] = snapshot
    cache.put(stream_id, snapshot)


def read_proposal(store: EventStore, cache: ReadCache, proposal_id: str) -> Proposal | None:
    """A proposal to change and commit (its append is version-checked)."""
    held = cache.get(proposal_id)
    if isinstance(held, ProposalEntry):
        return held.fold()
    if not cache.enabled:
        return store.get(Proposal, proposal_id)
    events, undecodable = store.audit_events(proposal_id)
    if not events:
        return None
    entry = ProposalEntry(events[-1].originator_version, tuple(events))
    proposal = entry.fold()
    if proposal is not None and undecodable is None:
        cache.put(proposal_id, entry)
    elif undecodable is not None:
        return store.get(Proposal, proposal_id)  # the store's own error or answer
    return proposal


# -- writes ----------------------------------------------------------------


def commit(store: EventStore, cache: ReadCache, work: Commit) -> None:
    """Commit; then keep what was written, or on a conflict drop what was read.

    A conflict means some stream in the commit (an aggregate or a read-set
    record) is not where this step believed: every entry the commit touched is
    dropped, so the retry reads them fresh whichever one clashed."""
    pending = [(a, tuple(a.pending_events)) for a in work.aggregates]
    try:
        store.commit(work)
    except ConcurrencyConflict:
        cache.forget([a.id for a in work.aggregates] + [c.stream_id for c in work.read_set])
        raise
    for aggregate, events in pending:
        remember(cache, aggregate, events)


def remember(cache: ReadCache, aggregate: LedgerAggregate, new_events: Sequence[Any]) -> None:
    """Write through after a successful commit (directory records and proposals only)."""
    if not cache.enabled or not new_events:
        return
    if isinstance(aggregate, DirectoryRecord):
        if aggregate.kind is DirectoryKind.STANDING_GRANT_USES:
            return  # read from its stream by every use, never from here
        cache.put(aggregate.id, DirectorySnapshot.from_record(aggregate))
    elif isinstance(aggregate, Proposal):
        if aggregate.version_status(aggregate.current_version) is not ProposalStatus.PRESENTED:
            # Claimed, declined, canceled, conflicted: no cached read will want it
            # again (present and approve need a presented version), so it leaves.
            cache.forget([aggregate.id])
            return
        base = aggregate.version - len(new_events)
        held = cache.get(aggregate.id) if base else None
        if base == 0:
            events: tuple[Any, ...] = tuple(new_events)
        elif isinstance(held, ProposalEntry) and held.version == base:
            events = held.events + tuple(new_events)
        else:
            cache.forget([aggregate.id])
            return
        cache.put(aggregate.id, ProposalEntry(aggregate.version, events))
