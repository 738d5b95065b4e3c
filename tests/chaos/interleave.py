"""Deterministic interleaving: every actor is a thread, but only one ever runs.

An actor runs until it reaches a *yield point* (before a commit, a read, an
executor call, a worker crash point); there it parks and hands the baton back
to the scheduler, which decides (from the schedule's seeded generator) whether
to resume it, resume another parked actor, or start a new one. So actors
interleave at every point where the real system's processes can, yet a seed
always gives the same order. A thread waiting for the baton too long means a
deadlock in the code under test, and fails the schedule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

HANDOFF_TIMEOUT = 60.0


class Deadlock(AssertionError):
    """An actor (or the scheduler) waited for the baton longer than any step takes."""


class Baton:
    """Who may run now: ``holder`` is an actor, or None for the scheduler."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self.holder: Actor | None = None

    def resume(self, actor: Actor) -> None:
        """Scheduler: let ``actor`` run until it parks or finishes."""
        with self._cv:
            self.holder = actor
            self._cv.notify_all()
            if not self._cv.wait_for(lambda: self.holder is None, HANDOFF_TIMEOUT):
                raise Deadlock(f"actor {actor.name} neither parked nor finished")

    def park(self, actor: Actor) -> None:
        """Actor: give the baton back and wait for the next turn."""
        with self._cv:
            self.holder = None
            self._cv.notify_all()
            if not self._cv.wait_for(lambda: self.holder is actor, HANDOFF_TIMEOUT * 4):
                raise Deadlock(f"actor {actor.name} was never resumed")

    def wait_turn(self, actor: Actor) -> None:
        with self._cv:
            if not self._cv.wait_for(lambda: self.holder is actor, HANDOFF_TIMEOUT * 4):
                raise Deadlock(f"actor {actor.name} never got its first turn")

    def release(self) -> None:
        """Actor: finished; the baton goes back to the scheduler."""
        with self._cv:
            self.holder = None
            self._cv.notify_all()


class Actor:
    """One action (an approval, a worker run, a recovery tick...) on its own thread."""

    def __init__(self, baton: Baton, number: int, name: str, action: Callable[[], Any]) -> None:
        self.baton = baton
        self.number = number
        self.name = name
        self.action = action
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.parked_at: str = "start"
        self.attempt: str | None = None  # the attempt whose executor call it made last
        self.late_key: str | None = None  # a key its call landed past the deadline for
        self._thread = threading.Thread(
            target=self._run, name=f"actor-{number}-{name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            self.baton.wait_turn(self)
        except Deadlock as exc:
            self.error = exc
            self.done = True
            return
        try:
            self.result = self.action()
        except BaseException as exc:  # handed to the scheduler, which judges it
            self.error = exc
        finally:
            self.done = True
            self.baton.release()

    def park(self, where: str) -> None:
        self.parked_at = where
        self.baton.park(self)

    def join(self) -> None:
        self._thread.join(timeout=HANDOFF_TIMEOUT)
