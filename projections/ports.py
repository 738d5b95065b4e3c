"""What projections need from storage: a small view store with version guards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from eventsourcing.persistence import Tracking


@dataclass(frozen=True)
class ViewRecord:
    """One row of one view, tagged with the source stream version it reflects.

    ``list_pk``/``list_sk`` place it in a paginated list (e.g. attempts by
    status, oldest first); None keeps it out of every list.
    """

    name: str
    key: str
    version: int
    data: Mapping[str, Any]
    list_pk: str | None = None
    list_sk: str | None = None


class ViewStore(Protocol):
    """Stores views; a write never replaces a newer version (idempotent, ordered)."""

    def get_view(self, name: str, key: str) -> ViewRecord | None: ...

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        """Write if the stored version is older (or absent), or always with ``force``
        (a rebuild); True when written."""
        ...

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None, *, until: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        """A page of a list in ``list_sk`` order, strictly after ``cursor`` and, with
        ``until``, not after it (a range read: its cost is what it returns)."""
        ...


@dataclass(frozen=True)
class LogBatch:
    """A slice of the ordered log handed to one subscriber.

    ``stream_ids`` are the streams the slice touched, in log order, each once;
    ``tracking`` are the positions (eventsourcing ``Tracking``) the subscriber
    has processed once this slice is applied: one for a global notification
    log, one per shard for DynamoDB Streams.
    """

    stream_ids: tuple[str, ...]
    tracking: tuple[Tracking, ...]


class TrackedViewStore(ViewStore, Protocol):
    """A view store that records a subscriber's position with the rows it writes."""

    def put_views(self, records: Sequence[ViewRecord], tracking: Sequence[Tracking]) -> int:
        """Write every record that is newer than the stored one (version guard) and
        every position, in ONE atomic write; returns how many rows moved.

        A position not beyond the stored one raises the library's
        ``IntegrityError`` and nothing is written (another process got further)."""
        ...

    def max_tracking_id(self, application_name: str) -> int | None:
        """The last position recorded for a subscriber (eventsourcing convention)."""
        ...

    def get_views(self, name: str, keys: Sequence[str]) -> Mapping[str, ViewRecord]:
        """The stored rows of ``keys`` (absent ones left out), read in batches."""
        ...

    def replace_views(self, records: Sequence[ViewRecord], *, force: bool = False) -> int:
        """A rebuild's batched write: each row only if the stored one is older
        (``force``: not newer), so a row written meanwhile by the live projector
        at a newer version is never replaced; need not be durable (rebuildable).
        Returns how many rows were written."""
        ...


class Subscriber(Protocol):
    """One read model or notifier fed by the ordered log (a "subscriber of the log").

    ``apply`` writes the subscriber's effects and ``batch.tracking`` atomically,
    so after any crash it resumes exactly from what it has durably done.
    """

    name: str

    def apply(self, batch: LogBatch) -> int:
        """Apply one batch; returns how many rows (or deliveries) moved."""
        ...
