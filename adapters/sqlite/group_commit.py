"""Group commit: writes that arrive together are committed in one transaction
(and, on disk, one fsync) by one of their callers.

Every write of a process goes through :meth:`GroupCommit.submit`. A caller
that finds no commit in progress leads: it takes every write queued so far
(its own first), commits them in one ``BEGIN IMMEDIATE`` transaction, answers
each, and hands the lead to the oldest write that queued meanwhile. A caller
that finds a commit in progress queues its write and sleeps until it is
answered or given the lead. A lone caller therefore commits its own write at
once, as before; with several, the writes waiting behind one commit share the
next one instead of each taking the write lock, paying ``BEGIN``/``COMMIT``
and an fsync, and waking the next writer in turn.

Each write keeps its own answer: inside the batch it runs in a savepoint of
its own, in arrival order, so a write whose version check, read-set check or
create-only lookup clashes (with the store, or with a write earlier in the same
batch, exactly as if they had committed one after another) is rolled back to
its savepoint and raises its own error, and the writes beside it commit. A
failure of the transaction itself (the lock not taken, the commit refused, a
disk error) fails every write of the batch: none of them is acknowledged,
and none was written.

The batch is durable when any of its writes asks to be (``durable``): the one
fsync covers the writes that did not ask, which only makes them safer.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_BATCH = 64
"""Writes committed together at most (bounds one transaction's time and size)."""


@dataclass
class Write:
    """One caller's write: what to run inside the transaction, and its answer."""

    run: Callable[[Any], Any]  # (cursor) -> result, inside the batch transaction
    durable: bool
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None
    lead: bool = False  # set instead of an answer: the write's caller commits next
    answered: bool = False


Batch = Sequence[Write]


class GroupCommit:
    """Queues writes and lets one caller at a time commit a batch of them.

    ``commit_batch(batch, durable)`` runs every write of ``batch`` in one
    transaction (each in a savepoint, setting its ``result`` or ``error``) and
    commits it; if it raises, every write of the batch not yet failed gets that
    error. ``single(write)`` commits a batch of one (no savepoint needed: its
    error rolls the whole transaction back).
    """

    def __init__(
        self,
        commit_batch: Callable[[Batch, bool], None],
        single: Callable[[Write], Any],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._commit_batch = commit_batch
        self._single = single
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: deque[Write] = deque()
        self._leading = False
        self.shared = 0  # writes committed in a batch with others, since start

    def submit(self, run: Callable[[Any], Any], *, durable: bool) -> Any:
        """Commit ``run``'s statements with whatever else is queued; its own answer."""
        write = Write(run, durable)
        with self._lock:
            if self._leading:
                self._queue.append(write)
                lead = False
            else:
                self._leading = lead = True
        if not lead:
            write.done.wait()
            if not write.lead:
                return _answer(write)
            # promoted: this caller commits the next batch, its own write in it
        try:
            self._lead(write)
        finally:
            self._hand_over()
        return _answer(write)

    def _lead(self, own: Write) -> None:
        with self._lock:
            batch = [own]
            while self._queue and len(batch) < self._max_batch:
                batch.append(self._queue.popleft())
        try:
            if len(batch) == 1:
                try:
                    own.result = self._single(own)
                except BaseException as exc:
                    own.error = exc
            else:
                self.shared += len(batch)
                try:
                    self._commit_batch(batch, any(w.durable for w in batch))
                except BaseException as exc:
                    for write in batch:
                        if write.error is None:
                            write.error = exc
        finally:
            for write in batch:
                write.answered = True
                if write is not own:
                    write.done.set()

    def _hand_over(self) -> None:
        """The lead passes to the oldest queued write, or lapses."""
        with self._lock:
            if self._queue:
                nxt = self._queue.popleft()
                nxt.lead = True
                nxt.done.set()
            else:
                self._leading = False

    def queued(self) -> int:
        """Writes waiting behind the commit in progress."""
        with self._lock:
            return len(self._queue)

    def leading(self) -> bool:
        """True while a caller commits (its own write, or a batch)."""
        with self._lock:
            return self._leading


def _answer(write: Write) -> Any:
    assert write.answered
    if write.error is not None:
        raise write.error
    return write.result
