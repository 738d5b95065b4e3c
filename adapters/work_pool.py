"""How many attempts one process works on at once: bounded per executor build
and in total, so a slow provider delays only its own work.

The worker's protocol is per attempt and does not change here: each job is one
``Worker.process`` or ``Worker.recover`` call (lease, recheck, dispatch marker,
call, result under the lease; ``domain/services/execution.py``). The pool only
decides which of the attempts it was told about runs next. Every build has a
queue of its own and may have at most ``per_build`` attempts running; the
process at most ``total``. A free slot takes the oldest job of the next build
(round robin) that is below its bound, so a build whose calls take seconds
fills only its own slots, and every other build's attempts keep the rest.

A queued job is a hint, as the feed's record was: nothing is leased until a
slot runs it, so a job dropped (its build's queue full, the pool closing)
loses nothing; the attempt stays queued in the store and recovery finds it
due. An attempt is held at most once (queued or running): a second hint for
it is refused, as the lease would refuse the second run anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

logger = logging.getLogger("ledger.runtime")

MAX_QUEUED_PER_BUILD = 1024
"""Hints kept per build; beyond it they are dropped (recovery finds the attempts)."""


@dataclass(frozen=True)
class Job:
    """One attempt to work on, the build whose bound it counts against, and the step."""

    attempt_id: str
    build: Hashable
    run: Callable[[], object]


class WorkPool:
    """Runs jobs on at most ``total`` threads, at most ``per_build`` per build."""

    def __init__(
        self,
        *,
        total: int,
        per_build: int,
        max_queued_per_build: int = MAX_QUEUED_PER_BUILD,
        name: str = "ledger-attempt",
    ) -> None:
        if total < 1 or per_build < 1:
            raise ValueError("the bounds must be at least 1")
        self.total = total
        self.per_build = min(per_build, total)
        self.max_queued_per_build = max_queued_per_build
        self.name = name
        self._lock = threading.Condition()
        self._queues: OrderedDict[Hashable, deque[Job]] = OrderedDict()
        self._running: dict[Hashable, int] = {}
        self._held: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.peak_running: dict[Hashable, int] = {}  # the most seen at once, per build

    # -- what callers use ------------------------------------------------------

    def submit(self, attempt_id: str, build: Hashable, run: Callable[[], object]) -> bool:
        """Queue one job; False when the attempt is already held, its build's
        queue is full or the pool is closed (the hint is dropped)."""
        with self._lock:
            if self._closed or attempt_id in self._held:
                return False
            queue = self._queues.setdefault(build, deque())
            if len(queue) >= self.max_queued_per_build:
                logger.debug("work pool: build queue full, hint dropped")
                return False
            queue.append(Job(attempt_id, build, run))
            self._held.add(attempt_id)
            # A thread for every held attempt, up to the total bound: a burst of
            # submissions never waits for one thread to come back.
            if len(self._threads) < min(self.total, len(self._held)):
                self._start_thread()
            self._lock.notify()
            return True

    def holds(self, attempt_id: str) -> bool:
        """True while the attempt is queued or running here."""
        with self._lock:
            return attempt_id in self._held

    def running(self) -> int:
        with self._lock:
            return sum(self._running.values())

    def queued(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def idle(self) -> bool:
        """Nothing queued and nothing running."""
        with self._lock:
            return not self._held

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or running (at most ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._held:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
            return True

    def close(self) -> int:
        """Start nothing more: the queued jobs are dropped (their attempts stay
        queued in the store; nothing of them was leased). Returns how many."""
        with self._lock:
            self._closed = True
            dropped = 0
            for queue in self._queues.values():
                for job in queue:
                    self._held.discard(job.attempt_id)
                dropped += len(queue)
                queue.clear()
            self._lock.notify_all()
            return dropped

    def wait_running(self, timeout: float) -> int:
        """After ``close``: wait (at most ``timeout`` seconds) for the running jobs
        to finish; returns how many are still running."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while sum(self._running.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(left)
            return sum(self._running.values())

    # -- the slots -------------------------------------------------------------

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._serve, name=f"{self.name}-{len(self._threads) + 1}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _take(self) -> Job | None:
        """The oldest job of the first build (round robin) below its bound."""
        for build, queue in self._queues.items():
            if queue and self._running.get(build, 0) < self.per_build:
                self._queues.move_to_end(build)  # the next slot looks at the others first
                return queue.popleft()
        return None

    def _serve(self) -> None:
        while True:
            with self._lock:
                job = self._take()
                while job is None:
                    if self._closed:
                        return
                    self._lock.wait()
                    job = self._take()
                running = self._running.get(job.build, 0) + 1
                self._running[job.build] = running
                self.peak_running[job.build] = max(self.peak_running.get(job.build, 0), running)
            try:
                job.run()
            except Exception as exc:  # a job logs its own outcome; never the content
                logger.error("attempt step failed: %s", type(exc).__name__)
            finally:
                with self._lock:
                    left = self._running[job.build] - 1
                    if left:
                        self._running[job.build] = left
                    else:
                        del self._running[job.build]
                        if not self._queues.get(job.build, True):
                            del self._queues[job.build]  # builds come and go: keep none empty
                    self._held.discard(job.attempt_id)
                    self._lock.notify_all()
