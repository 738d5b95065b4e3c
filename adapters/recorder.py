"""The recorder contract every ledger backend implements.

A ledger recorder is an eventsourcing ``AggregateRecorder`` whose
``insert_events`` also accepts, in the same atomic write:

- ``read_checks``: ``ReadCheck(stream_id, version)``, the stream must still be at
  that version (its slot ``version + 1`` is empty);
- ``lookups``: create-only ``Lookup`` items (the token-hash index); one whose
  ``now`` is set replaces an item of its key that had expired by then;
- ``due``: ``DueWork`` upserts (or removals when ``next_action_at`` is None);
- ``heads``: ``StreamHead`` upserts, the head index an audit digest reads
  (one entry per stream: its version and the hash of its newest event);
- ``durable``: True (the default) when the write must survive a power cut
  before the call returns; False lets a store that pays for each fsync
  (SQLite) leave it to the next durable write (docs/durability.md).

A clash raises an ``IntegrityError`` subclass that names what clashed, so the
library's own recorder test cases still hold and the store can map it to a
domain error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from eventsourcing.persistence import AggregateRecorder, IntegrityError, StoredEvent

from domain.ports import DueWork, Lookup, ReadCheck, StreamHead
from domain.standing_grants import DEFAULT_USE_SHARDS

if TYPE_CHECKING:
    from adapters.backend import Backend


class StreamConflictError(IntegrityError):
    """A (stream, version) slot was taken, or a read-set stream moved on."""

    def __init__(self, stream_id: str, message: str = "") -> None:
        self.stream_id = stream_id
        super().__init__(message or f"stream conflict on {stream_id}")


class LookupConflictError(IntegrityError):
    """A create-only lookup item already exists."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__("lookup item already exists")


class LedgerRecorder(AggregateRecorder, ABC):
    """An aggregate recorder with read-set checks, lookups and due work."""

    @abstractmethod
    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        read_checks: Sequence[ReadCheck] = (),
        lookups: Sequence[Lookup] = (),
        due: Sequence[DueWork] = (),
        heads: Sequence[StreamHead] = (),
        **kwargs: object,
    ) -> Sequence[int] | None:
        """Write everything or nothing."""

    @abstractmethod
    def get_lookup(self, key: str, *, now: datetime | None = None) -> Mapping[str, str] | None:
        """A lookup item's value by key, strongly consistent; with ``now``, an
        item whose ``expires_at`` is not after it is absent."""

    @abstractmethod
    def delete_lookup(self, key: str) -> bool:
        """Remove one lookup item (a session signed out); False when there was none."""

    @abstractmethod
    def delete_expired_lookups(self, now: datetime, limit: int) -> int:
        """Remove at most ``limit`` lookup items that expired by ``now``; how many
        went. A store whose items expire by themselves (DynamoDB's TTL) removes
        none here."""

    @abstractmethod
    def select_due(
        self, upto: datetime, limit: int, cursor: str | None = None
    ) -> tuple[list[DueWork], str | None]:
        """Due entries with ``next_action_at <= upto`` ordered by (time, attempt id),
        strictly after ``cursor``; returns the page and the next cursor (None when done)."""

    def select_events_at(self, keys: Sequence[tuple[str, int]]) -> list[StoredEvent]:
        """The stored events at exact (stream, version) slots; absent slots are left out.

        One read per slot here; a backend with a batched read overrides it."""
        found: list[StoredEvent] = []
        for stream_id, version in keys:
            found.extend(self.select_events(stream_id, gt=version - 1, lte=version))
        return found

    def select_stream_versions(self, stream_ids: Sequence[str]) -> dict[str, int]:
        """The version of each stream that has events (the others are left out).

        From the newest events here; a backend with a head index may answer from
        it alone, for streams every commit writes together with their head."""
        return {
            str(e.originator_id): e.originator_version
            for e in self.select_latest_events(stream_ids)
        }

    def grant_use_shards(self) -> int:
        """How many use shards a new standing grant gets (0: its uses on its record)."""
        return DEFAULT_USE_SHARDS

    def select_latest_events(self, stream_ids: Sequence[str]) -> list[StoredEvent]:
        """The newest stored event of each stream; streams without events are left out.

        One read per stream here; a backend with a batched read overrides it."""
        found: list[StoredEvent] = []
        for stream_id in dict.fromkeys(stream_ids):
            found.extend(self.select_events(stream_id, desc=True, limit=1))
        return found

    @abstractmethod
    def make_backend(self) -> Backend:
        """The backend around this recorder (its views, feeds and enumeration)."""

    @abstractmethod
    def select_heads(self) -> Iterator[StreamHead]:
        """Every entry of the head index, sorted by stream id."""

    @abstractmethod
    def select_stream_ids(self, prefix: str = "") -> Iterator[str]:
        """Every stream id with events that starts with ``prefix``, sorted (an admin
        enumeration for rebuilds and head-index repair: may read the whole store)."""

    @abstractmethod
    def insert_head_if_absent(self, head: StreamHead) -> bool:
        """Add a head-index entry for a stream that has none; never change one."""

    def close(self) -> None:
        """Release connections."""


def due_sort_key(item: DueWork) -> str:
    """Sortable, unique key of a due entry: zero-padded epoch ms, then the attempt id."""
    assert item.next_action_at is not None
    return f"{int(item.next_action_at.timestamp() * 1000):015d}#{item.attempt_id}"


def check_due_page(
    rows: Sequence[tuple[str, DueWork]], limit: int
) -> tuple[list[DueWork], str | None]:
    """Cut a sorted list of (sort key, entry) to a page and its cursor."""
    page = list(rows[:limit])
    cursor = page[-1][0] if len(rows) > limit and page else None
    return [item for _, item in page], cursor
