"""In-process notification of view changes: what long polls wait on.

``NotifyingViewStore`` wraps the process's view store; after a write that
moved a row it signals ``ViewChanges``, which wakes every waiter registered
for that row. An async waiter (``watch``, for the HTTP long poll) is woken on
its own event loop (``call_soon_threadsafe``) and costs one ``asyncio.Event``
and a set entry: no thread, no database connection and no timer of its own
while it waits, so idle waiters cost no CPU. A blocking waiter
(``watch_blocking``, for an in-process caller on its own thread) waits on a
``threading.Event``.

Only writes made by this process are seen (the projector and the worker of
``ledger serve``); a view written elsewhere reaches a waiter when the wait
ends, as the plain answer.

``close`` (a stopping ``ledger serve``, once its worker has recorded what it
was executing) wakes every waiter and every later one at once: each long poll
answers what the row says now instead of holding the graceful stop until its
wait runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from eventsourcing.persistence import Tracking

from projections.ports import TrackedViewStore, ViewRecord


class Waiter:
    """One waiting request: an event set (on its own loop) when its row changes,
    with the row as written (``record``), so the waiter need not read it back."""

    __slots__ = ("event", "key", "loop", "record")

    def __init__(self, key: tuple[str, str], loop: asyncio.AbstractEventLoop) -> None:
        self.key = key
        self.loop = loop
        self.event = asyncio.Event()
        self.record: ViewRecord | None = None

    def wake(self, record: ViewRecord | None = None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            self.loop.call_soon_threadsafe(self._set, record)

    def _set(self, record: ViewRecord | None) -> None:
        if record is None or self.record is None or record.version >= self.record.version:
            self.record = record
        self.event.set()

    def take(self) -> ViewRecord | None:
        """The row the last wake-up carried (None: read it from the store)."""
        record, self.record = self.record, None
        return record

    async def wait(self, seconds: float) -> bool:
        """True when woken within ``seconds`` (the event is cleared for the next wait)."""
        try:
            await asyncio.wait_for(self.event.wait(), timeout=seconds)
        except TimeoutError:
            return False
        self.event.clear()
        return True


class BlockingWaiter:
    """One waiting thread: like :class:`Waiter`, on a ``threading.Event``."""

    __slots__ = ("_lock", "event", "key", "record")

    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key
        self.event = threading.Event()
        self.record: ViewRecord | None = None
        self._lock = threading.Lock()

    def wake(self, record: ViewRecord | None = None) -> None:
        with self._lock:
            if record is None or self.record is None or record.version >= self.record.version:
                self.record = record
        self.event.set()

    def take(self) -> ViewRecord | None:
        """The row the last wake-up carried (None: read it from the store)."""
        with self._lock:
            record, self.record = self.record, None
        return record

    def wait(self, seconds: float) -> bool:
        """True when woken within ``seconds`` (the event is cleared for the next wait)."""
        if not self.event.wait(seconds):
            return False
        self.event.clear()
        return True


_W = TypeVar("_W", Waiter, BlockingWaiter)


class ViewChanges:
    """The hub: waiters by (view name, key), signalled after a view write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[tuple[str, str], set[Waiter | BlockingWaiter]] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called: a woken waiter answers, not waits."""
        return self._closed

    def close(self) -> None:
        """End every wait now and every later one at once (the process is stopping)."""
        with self._lock:
            self._closed = True
            waiters = [waiter for found in self._waiters.values() for waiter in found]
        for waiter in waiters:
            waiter.wake()

    @contextlib.contextmanager
    def watch(self, name: str, key: str) -> Iterator[Waiter]:
        """Register a waiter for one row for the duration of the block; register
        BEFORE reading the row, so a change between the read and the wait is seen."""
        with self._registered(Waiter((name, key), asyncio.get_running_loop())) as waiter:
            yield waiter

    @contextlib.contextmanager
    def watch_blocking(self, name: str, key: str) -> Iterator[BlockingWaiter]:
        """``watch`` for a caller that blocks its own thread while it waits."""
        with self._registered(BlockingWaiter((name, key))) as waiter:
            yield waiter

    @contextlib.contextmanager
    def _registered(self, waiter: _W) -> Iterator[_W]:
        with self._lock:
            self._waiters.setdefault(waiter.key, set()).add(waiter)
            closed = self._closed
        if closed:
            waiter.wake()
        try:
            yield waiter
        finally:
            with self._lock:
                found = self._waiters.get(waiter.key)
                if found is not None:
                    found.discard(waiter)
                    if not found:
                        del self._waiters[waiter.key]

    def notify(self, name: str, key: str, record: ViewRecord | None = None) -> None:
        """Wake the row's waiters; ``record`` is the row as just written, if known."""
        with self._lock:
            waiters = list(self._waiters.get((name, key), ()))
        for waiter in waiters:
            waiter.wake(record)

    def waiting(self) -> int:
        """How many waiters are registered (for tests and metrics)."""
        with self._lock:
            return sum(len(found) for found in self._waiters.values())


class NotifyingViewStore:
    """A view store that signals ``changes`` after every write that moved a row."""

    def __init__(self, inner: TrackedViewStore, changes: ViewChanges | None = None) -> None:
        self.inner = inner
        self.changes = changes or ViewChanges()

    def get_view(self, name: str, key: str) -> ViewRecord | None:
        return self.inner.get_view(name, key)

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        moved = self.inner.put_view(record, force=force)
        if moved:
            self.changes.notify(record.name, record.key, record)
        return moved

    def put_views(self, records: Sequence[ViewRecord], tracking: Sequence[Tracking]) -> int:
        """A batched (tracked) write: every row named is signalled. When every row
        moved the waiters get the row as written; otherwise, as a row may not
        have moved, they read it back from the store."""
        moved = self.inner.put_views(records, tracking)
        every = moved == len(records)
        for record in records:
            self.changes.notify(record.name, record.key, record if every else None)
        return moved

    def replace_views(self, records: Sequence[ViewRecord], *, force: bool = False) -> int:
        """A rebuild's batched write: the rows named are signalled (read back)."""
        written: int = self.inner.replace_views(records, force=force)
        if written:
            for record in records:
                self.changes.notify(record.name, record.key)
        return written

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None, *, until: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        return self.inner.list_views(list_pk, limit, cursor, until=until)

    def max_tracking_id(self, application_name: str) -> int | None:
        return self.inner.max_tracking_id(application_name)

    def __getattr__(self, name: str) -> Any:
        # anything else a particular store offers (rebuild helpers, tracking)
        return getattr(self.inner, name)
