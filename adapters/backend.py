"""The backend seam: everything that differs by store, behind one small interface.

``bootstrap.build_backend`` picks one :class:`Backend` from the settings
(memory, SQLite or DynamoDB, each in ``adapters/<store>/backend.py``); nothing
else asks which store it runs on. A backend hands out:

- ``recorder``: the ledger recorder (events, lookups, due work in one commit);
- ``views``: the tracked view store living beside the events;
- ``work_feed()``: what wakes the worker (a hint; recovery catches the rest);
- ``log_reader(name)``: the ordered log for one subscriber, resuming from
  the position that subscriber recorded with its last write;
- ``attempt_ids()``: every attempt stream, for rebuilds (admin batch work);
- ``attempt_streams(batch)``: every attempt stream with its events, in
  batches (one ordered pass for a rebuild);
- ``lag(name)``: how far a subscriber is behind the log;
- ``from_settings(settings)``: the backend opened as the settings say;
  ``preflight(settings)``: a start-up check, before anything is opened, of
  what the loops will read (raises :class:`PreflightError`); ``describe()``:
  the store in a few words.

To add something that differs by store, add an abstract method here and one
implementation per backend.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from eventsourcing.persistence import (
    ApplicationRecorder,
    IntegrityError,
    Mapper,
    StoredEvent,
    Tracking,
)

from adapters.recorder import LedgerRecorder

if TYPE_CHECKING:
    from adapters.dynamodb.client import DynamoDBClient, DynamoDBStreamsClient
    from adapters.settings import Settings
from adapters.streams import WORK_TOPICS
from domain.spec import ATTEMPT_ID_PREFIX
from projections.ports import LogBatch, TrackedViewStore, ViewRecord

BATCH_LIMIT = 100
REBUILD_BATCH = 500
"""Attempt streams folded, compared and written per batch of a rebuild."""

AttemptStreams = list[tuple[str, list[StoredEvent]]]


@dataclass(frozen=True)
class Lag:
    """How far one subscriber is behind the log.

    ``events_behind`` counts events written and not yet applied (for a stream
    reader: records read and not yet applied); ``oldest_age_seconds`` is the
    age of the oldest of them (0 when caught up). ``exact`` is False when the
    figure is a lower bound (a stream reader cannot see what it has not read).
    """

    events_behind: int
    oldest_age_seconds: float
    exact: bool = True

    def as_dict(self) -> dict[str, float | int | bool]:
        return {
            "events_behind": self.events_behind,
            "oldest_unprocessed_age_seconds": round(self.oldest_age_seconds, 3),
            "exact": self.exact,
        }


class WorkFeed(Protocol):
    """A source of attempt ids that may need the worker; ``trigger`` names what
    delivers them (``notification``, ``stream``) for the worker's span."""

    trigger: str

    def poll(self, wait_seconds: float) -> list[str]: ...


class LogReader(Protocol):
    """The ordered log as one subscriber reads it, from its recorded position."""

    name: str

    def poll(self) -> LogBatch | None:
        """The next batch after the current position, or None when caught up."""
        ...

    def advance(self, batch: LogBatch) -> None:
        """The batch was applied (its positions are durable): move past it."""
        ...

    def reset(self) -> None:
        """Forget what was read and resume from the durably recorded position."""
        ...

    def lag(self, now: datetime) -> Lag: ...

    def take_gaps(self) -> list[str]:
        """Parts of the log lost before they were read (names, for the report);
        the caller covers them with a rebuild. Cleared by the call."""
        ...

    def start_from_end(self, records: Sequence[ViewRecord]) -> bool:
        """For a subscriber that has no recorded position yet: record ``records``
        and the end of the log as its position, in one write, so it starts
        from now instead of the whole log; True when it did. (A stream reader
        cannot name the end of every shard: it writes ``records`` only and
        reads the stream's retention, the subscriber filtering by time.)"""
        ...


class PreflightError(Exception):
    """Something the runtime's loops need does not answer; the message is one
    line naming the setting to fix."""


class Backend(ABC):
    """What a store provides; one instance per process, built by bootstrap."""

    kind: str
    recorder: LedgerRecorder
    views: TrackedViewStore

    @abstractmethod
    def work_feed(self) -> WorkFeed:
        """The worker's wake-up feed (starts at the newest work; recovery covers the past)."""

    @abstractmethod
    def log_reader(self, name: str) -> LogReader:
        """The log for subscriber ``name``, resuming from its recorded position
        (one per name and process: later calls return the same one)."""

    @abstractmethod
    def attempt_ids(self) -> Iterator[str]:
        """Every attempt stream id (admin batch enumeration, for rebuilds)."""

    rebuild_batch: int = REBUILD_BATCH

    def attempt_streams(self, batch: int) -> Iterator[AttemptStreams]:
        """Every attempt stream with its stored events in version order, ``batch``
        streams at a time (admin batch work, for rebuilds). This default reads
        each stream on its own; a backend that can do better does it in one pass."""
        ids: list[str] = []
        for attempt_id in self.attempt_ids():
            ids.append(attempt_id)
            if len(ids) >= batch:
                yield [(i, list(self.recorder.select_events(i))) for i in ids]
                ids = []
        if ids:
            yield [(i, list(self.recorder.select_events(i))) for i in ids]

    @abstractmethod
    def lag(self, name: str, now: datetime) -> Lag | None:
        """Subscriber ``name``'s lag, or None when this process cannot know it."""

    @classmethod
    @abstractmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        dynamodb_client: DynamoDBClient | None = None,
        dynamodb_streams_client: DynamoDBStreamsClient | None = None,
    ) -> Backend:
        """The backend on the store the settings name (clients injected by tests)."""

    @classmethod
    def preflight(cls, settings: Settings) -> None:
        """Fail fast, before anything is opened and the worker and subscriber loops
        start, when what they read does not answer (:class:`PreflightError`).
        Nothing to check by default."""
        return None

    @abstractmethod
    def describe(self) -> str:
        """The store in a few words, for the start-up line (no secrets)."""

    @abstractmethod
    def reopen(self) -> Backend:
        """A new backend on the same data, as another process would open it
        (same clients; fresh log readers reading their positions again)."""

    def close(self) -> None:
        self.recorder.close()


class NotificationLogFeed:
    """Reads new events from an embedded store's notification log.

    By default only Queued/Requeued events (work for the worker); with
    ``topics=()`` every event.
    """

    trigger = "notification"

    def __init__(
        self,
        recorder: ApplicationRecorder,
        *,
        from_start: bool = False,
        topics: Sequence[str] = tuple(sorted(WORK_TOPICS)),
    ) -> None:
        self.recorder = recorder
        self.topics = list(topics)
        self.position = 0 if from_start else (recorder.max_notification_id() or 0)

    def poll(self, wait_seconds: float) -> list[str]:
        notifications = self.recorder.select_notifications(
            start=self.position, limit=BATCH_LIMIT, topics=self.topics, inclusive_of_start=False
        )
        if not notifications:
            time.sleep(wait_seconds)
            return []
        self.position = notifications[-1].id
        return list(dict.fromkeys(str(n.originator_id) for n in notifications))


class NotificationLogReader:
    """A subscriber's view of an embedded store's notification log (gap-free,
    totally ordered ids), resuming after the id it recorded last."""

    def __init__(
        self, name: str, recorder: ApplicationRecorder, views: TrackedViewStore, mapper: Mapper[str]
    ) -> None:
        self.name = name
        self.recorder = recorder
        self.views = views
        self.mapper = mapper
        self.position = 0
        self.reset()

    def reset(self) -> None:
        self.position = self.views.max_tracking_id(self.name) or 0

    def poll(self) -> LogBatch | None:
        notifications = self.recorder.select_notifications(
            start=self.position, limit=BATCH_LIMIT, inclusive_of_start=False
        )
        if not notifications:
            return None
        return LogBatch(
            stream_ids=tuple(dict.fromkeys(str(n.originator_id) for n in notifications)),
            tracking=(Tracking(self.name, notifications[-1].id),),
        )

    def advance(self, batch: LogBatch) -> None:
        self.position = max([self.position, *(t.notification_id for t in batch.tracking)])

    def take_gaps(self) -> list[str]:
        return []

    def start_from_end(self, records: Sequence[ViewRecord]) -> bool:
        if self.views.max_tracking_id(self.name) is not None:
            return False  # it has run before: it resumes from its position
        end = self.recorder.max_notification_id() or 0
        # IntegrityError: another process recorded a position first; resume from it
        with contextlib.suppress(IntegrityError):
            self.views.put_views(records, [Tracking(self.name, end)] if end else [])
        self.reset()
        return True

    def lag(self, now: datetime) -> Lag:
        return notification_lag(self.name, self.recorder, self.views, self.mapper, now)


def notification_lag(
    name: str,
    recorder: ApplicationRecorder,
    views: TrackedViewStore,
    mapper: Mapper[str],
    now: datetime,
) -> Lag:
    """Events after the subscriber's recorded position, and the age of the first."""
    done = views.max_tracking_id(name) or 0
    newest = recorder.max_notification_id() or 0
    if newest <= done:
        return Lag(0, 0.0)
    first = recorder.select_notifications(start=done, limit=1, inclusive_of_start=False)
    age = 0.0
    if first:
        try:
            written = getattr(mapper.to_domain_event(first[0]), "timestamp", None)
        except Exception:  # an undecodable event still counts; its age is unknown
            written = None
        if isinstance(written, datetime):
            age = max(0.0, (now - written).total_seconds())
    return Lag(newest - done, age)


class NotificationLogBackend(Backend):
    """An embedded store (memory, SQLite): the notification log feeds the worker
    and every subscriber; a subscriber's position is tracked beside its views."""

    recorder: LedgerRecorder  # also an ApplicationRecorder (the notification log)
    _mapper: Mapper[str]
    _readers: dict[str, NotificationLogReader]

    def work_feed(self) -> WorkFeed:
        return NotificationLogFeed(self._log())

    def log_reader(self, name: str) -> LogReader:
        if name not in self._readers:
            self._readers[name] = NotificationLogReader(name, self._log(), self.views, self._mapper)
        return self._readers[name]

    def attempt_ids(self) -> Iterator[str]:
        yield from self.recorder.select_stream_ids(ATTEMPT_ID_PREFIX)

    def lag(self, name: str, now: datetime) -> Lag | None:
        return notification_lag(name, self._log(), self.views, self._mapper, now)

    @abstractmethod
    def _log(self) -> ApplicationRecorder:
        """The recorder as the notification log (each subclass's recorder is both)."""
