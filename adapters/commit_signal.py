"""Commits made in this process, counted, so a loop waiting for new work wakes at once.

``LedgerStore.commit`` calls :meth:`CommitSignal.notify` after every write the
recorder accepted that queued work (a ``Queued`` or ``Requeued`` event: an
approval, a retry); the embedded stores' work feed waits on it
(``adapters/backend.py``) instead of sleeping out its poll interval. Other
commits (the worker's own lease and result, a proposal) do not wake it: it
would only read the log again and find nothing for it. A
commit in another process (another ``ledger serve`` on the same file, ``ledger
recover --once``) is not seen here: those loops still read the log at least
once per poll interval, so the signal only shortens a wait, it never replaces
the read. Waiting costs no CPU: a waiter sleeps on a condition variable until
the count moves or its interval ends.
"""

from __future__ import annotations

import threading
import weakref


class CommitSignal:
    """A counter of accepted commits and a condition to wait for it to move."""

    __slots__ = ("_condition", "_count")

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._count = 0

    @property
    def count(self) -> int:
        """Commits signalled so far; read it BEFORE reading the log, then pass it
        to :meth:`wait`, so a commit between the read and the wait is not missed."""
        return self._count

    def notify(self) -> None:
        """A commit was accepted: wake every waiter."""
        with self._condition:
            self._count += 1
            self._condition.notify_all()

    def wake(self) -> None:
        """Wake every waiter as a commit would (a stopping runtime): each reads the
        log once more and sees that it is stopping."""
        self.notify()

    def wait(self, seen: int, timeout: float) -> bool:
        """Sleep until a commit after ``seen`` (True) or ``timeout`` seconds (False)."""
        with self._condition:
            return self._condition.wait_for(lambda: self._count != seen, timeout)


_signals: weakref.WeakKeyDictionary[object, CommitSignal] = weakref.WeakKeyDictionary()
_signals_lock = threading.Lock()


def commit_signal(recorder: object) -> CommitSignal:
    """The one signal of ``recorder`` in this process (made on first use): the store
    that writes through a recorder and the feeds that read it share it."""
    with _signals_lock:
        signal = _signals.get(recorder)
        if signal is None:
            signal = _signals[recorder] = CommitSignal()
        return signal
