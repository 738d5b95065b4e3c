"""The store facade: the domain's ``EventStore`` port over any ledger recorder.

Maps aggregates to stored events with the eventsourcing ``Mapper`` and maps
recorder errors to domain errors, so no backend detail leaks upward.

Every stored event is at most ``MAX_EVENT_BYTES`` (topic + state), checked here
for every backend before anything is written: a DynamoDB item holds at most
400 KB, and an event that only fits in SQLite would make a stream that cannot
move to DynamoDB. The largest event a valid spec can make is a proposal
version of about 85 KB (measured in tests/integration/approval/
test_presentation_bounds.py); through the HTTP API its body is at most 64 KiB.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from eventsourcing.domain import CanMutateAggregate
from eventsourcing.persistence import (
    IntegrityError,
    Mapper,
    PersistenceError,
    StoredEvent,
)

from adapters.commit_signal import commit_signal
from adapters.mapping import LedgerMapper
from adapters.recorder import LedgerRecorder, LookupConflictError, StreamConflictError
from adapters.streams import WORK_TOPICS
from domain.base import LedgerAggregate, LedgerEvent
from domain.errors import (
    ConcurrencyConflict,
    EventTooLarge,
    LedgerError,
    LookupConflict,
    StoreUnavailable,
)
from domain.ports import Commit, DuePage, StreamHead

A = TypeVar("A", bound=LedgerAggregate)

MAX_EVENT_BYTES = 128 * 1024
"""The stated limit of one stored event (topic + state), well under DynamoDB's 400 KB item."""


def check_event_size(stored: StoredEvent, limit: int = MAX_EVENT_BYTES) -> None:
    """EventTooLarge (naming the event type, never its content) above ``limit``."""
    size = len(stored.topic.encode()) + len(stored.state)
    if size > limit:
        kind = stored.topic.rsplit(".", 1)[-1]
        raise EventTooLarge(
            f"A {kind} event would be {size} bytes, over the limit of "
            f"{limit} bytes per event; nothing was written."
        )


def make_mapper() -> Mapper[str]:
    """The one event <-> stored-event mapping used by every backend."""
    return LedgerMapper()


class LedgerStore:
    """Implements ``domain.ports.EventStore``."""

    def __init__(
        self,
        recorder: LedgerRecorder,
        mapper: Mapper[str] | None = None,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        self.recorder = recorder
        self.mapper = mapper or make_mapper()
        self.max_event_bytes = max_event_bytes

    # -- reads ---------------------------------------------------------------

    def read_stream(
        self, stream_id: str, *, gt: int | None = None, lte: int | None = None
    ) -> list[StoredEvent]:
        """Raw stored events of one stream, in version order."""
        try:
            return list(self.recorder.select_events(stream_id, gt=gt, lte=lte))
        except PersistenceError as exc:
            raise StoreUnavailable() from exc

    def events(self, stream_id: str) -> list[CanMutateAggregate[str]]:
        """Domain events of one stream, in version order."""
        # The library's mapper is typed to answer the widest event protocol; the
        # events it rebuilds here are the aggregates' own (they carry ``mutate``).
        return [
            cast("CanMutateAggregate[str]", self.mapper.to_domain_event(s))
            for s in self.read_stream(stream_id)
        ]

    def audit_events(
        self, stream_id: str, *, gt: int | None = None, lte: int | None = None
    ) -> tuple[list[LedgerEvent], int | None]:
        decoded: list[LedgerEvent] = []
        for stored in self.read_stream(stream_id, gt=gt, lte=lte):
            try:
                event = self.mapper.to_domain_event(stored)
            except Exception:  # tampered bytes, unknown topic, broken JSON
                return decoded, stored.originator_version
            if not isinstance(event, LedgerEvent):
                return decoded, stored.originator_version
            decoded.append(event)
        return decoded, None

    def get(self, cls: type[A], stream_id: str) -> A | None:
        aggregate: LedgerAggregate | None = None
        for domain_event in self.events(stream_id):
            aggregate = domain_event.mutate(aggregate)
        if aggregate is None:
            return None
        if not isinstance(aggregate, cls):
            return None
        return aggregate

    def version_of(self, stream_id: str) -> int:
        """Current version of a stream; 0 when it has no events."""
        try:
            last = self.recorder.select_events(stream_id, desc=True, limit=1)
        except PersistenceError as exc:
            raise StoreUnavailable() from exc
        return last[0].originator_version if last else 0

    def stream_heads(self) -> Iterator[StreamHead]:
        """The head index, sorted by stream id: what an audit digest covers."""
        try:
            yield from self.recorder.select_heads()
        except PersistenceError as exc:
            raise StoreUnavailable() from exc

    def index_missing_heads(self) -> tuple[int, int, list[str]]:
        """Add head-index entries for streams that have none (written before the
        index existed); an existing entry is never changed, so tampered events
        cannot launder themselves into the index.

        Returns the streams seen, the entries added, and the streams skipped
        because their newest event does not decode.
        """
        seen = added = 0
        skipped: list[str] = []
        try:
            for stream_id in self.recorder.select_stream_ids():
                seen += 1
                last = self.recorder.select_events(stream_id, desc=True, limit=1)
                try:
                    event = self.mapper.to_domain_event(last[0])
                except Exception:  # tampered bytes, unknown topic
                    skipped.append(stream_id)
                    continue
                if not isinstance(event, LedgerEvent):
                    skipped.append(stream_id)
                    continue
                head = StreamHead(stream_id, event.originator_version, event.hash())
                added += self.recorder.insert_head_if_absent(head)
        except PersistenceError as exc:
            raise StoreUnavailable() from exc
        return seen, added, skipped

    def events_at(self, keys: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], LedgerEvent]:
        return {
            (str(e.originator_id), e.originator_version): e
            for e in self._decoded(self.recorder.select_events_at, keys)
        }

    def latest_events(self, stream_ids: Sequence[str]) -> Mapping[str, LedgerEvent]:
        return {
            str(e.originator_id): e
            for e in self._decoded(self.recorder.select_latest_events, stream_ids)
        }

    def stream_versions(self, stream_ids: Sequence[str]) -> Mapping[str, int]:
        try:
            return self.recorder.select_stream_versions(stream_ids)
        except PersistenceError as exc:
            raise StoreUnavailable() from exc

    def grant_use_shards(self) -> int:
        try:
            return self.recorder.grant_use_shards()
        except PersistenceError as exc:
            raise StoreUnavailable() from exc

    def _decoded(
        self, select: Callable[[Any], Sequence[StoredEvent]], asked: Any
    ) -> list[LedgerEvent]:
        """The ledger events of one batched recorder read, decoded."""
        try:
            stored = select(asked)
        except PersistenceError as exc:
            raise StoreUnavailable() from exc
        decoded = [self.mapper.to_domain_event(event) for event in stored]
        return [event for event in decoded if isinstance(event, LedgerEvent)]

    def get_lookup(self, key: str, *, now: datetime | None = None) -> Mapping[str, str] | None:
        try:
            return self.recorder.get_lookup(key, now=now)
        except PersistenceError as exc:
            raise StoreUnavailable() from exc

    def delete_lookup(self, key: str) -> bool:
        """Remove one lookup item (a console session signed out); False when absent."""
        try:
            return self.recorder.delete_lookup(key)
        except PersistenceError as exc:
            raise StoreUnavailable() from exc

    def sweep_lookups(self, now: datetime, limit: int) -> int:
        """Delete at most ``limit`` lookup items that expired by ``now`` (none on
        DynamoDB, whose TTL deletes them); how many went."""
        try:
            return self.recorder.delete_expired_lookups(now, limit)
        except PersistenceError as exc:
            raise StoreUnavailable() from exc

    def due_work(self, now: datetime, limit: int, cursor: str | None = None) -> DuePage:
        try:
            items, next_cursor = self.recorder.select_due(now, limit, cursor)
        except PersistenceError as exc:
            raise StoreUnavailable() from exc
        return DuePage(items=items, cursor=next_cursor)

    # -- writes --------------------------------------------------------------

    def commit(self, commit: Commit) -> None:
        stored: list[StoredEvent] = []
        heads: list[StreamHead] = []
        pending: Sequence[LedgerAggregate] = commit.aggregates
        for aggregate in pending:
            events = aggregate.collect_events()
            for domain_event in events:
                stored.append(self.mapper.to_stored_event(domain_event))
            if events:
                # The head index moves in the same atomic write as the events.
                heads.append(StreamHead(aggregate.id, aggregate.version, aggregate.chain_head))
        for event in stored:
            check_event_size(event, self.max_event_bytes)
        if not stored and not commit.lookups and not commit.due:
            return
        try:
            self.recorder.insert_events(
                stored,
                read_checks=commit.read_set,
                lookups=commit.lookups,
                due=commit.due,
                heads=heads,
                durable=commit.durable,
            )
        except StreamConflictError as exc:
            raise ConcurrencyConflict(exc.stream_id) from exc
        except LookupConflictError as exc:
            raise LookupConflict(exc.key) from exc
        except IntegrityError as exc:
            stream = str(stored[0].originator_id) if stored else ""
            raise ConcurrencyConflict(stream) from exc
        except LedgerError:
            raise
        except PersistenceError as exc:
            raise StoreUnavailable() from exc
        if any(event.topic in WORK_TOPICS for event in stored):
            # Work was queued: this process's worker, waiting on the signal, reads it now.
            commit_signal(self.recorder).notify()
