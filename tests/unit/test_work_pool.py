"""The bounded pool of attempts: at most ``per_build`` running per build and
``total`` in all, a slow build never holding another's slots, each attempt
held once, and a close that starts nothing more (events, never sleeps)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from adapters.work_pool import WorkPool

WAIT = 10.0  # a bound on waiting for a thread that is expected to get there


class Calls:
    """Jobs that record when they start and block until their build is released."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.started: Counter[str] = Counter()
        self.finished: Counter[str] = Counter()
        self.released: dict[str, threading.Event] = {}

    def job(self, build: str) -> Callable[[], None]:
        gate = self.released.setdefault(build, threading.Event())

        def run() -> None:
            with self.lock:
                self.started[build] += 1
                self.lock.notify_all()
            assert gate.wait(WAIT)
            with self.lock:
                self.finished[build] += 1
                self.lock.notify_all()

        return run

    def release(self, build: str) -> None:
        self.released.setdefault(build, threading.Event()).set()

    def wait_for(self, condition: Callable[[], bool]) -> None:
        with self.lock:
            assert self.lock.wait_for(condition, WAIT), (self.started, self.finished)


def test_a_blocked_build_keeps_only_its_own_slots_and_another_build_finishes() -> None:
    pool = WorkPool(total=8, per_build=4)
    calls = Calls()
    for n in range(6):
        assert pool.submit(f"slow-{n}", "slow", calls.job("slow"))
    calls.release("fast")
    for n in range(3):
        assert pool.submit(f"fast-{n}", "fast", calls.job("fast"))

    calls.wait_for(lambda: calls.finished["fast"] == 3 and calls.started["slow"] == 4)
    # the slow build is still blocked, at its bound, with two of its own waiting
    assert calls.finished["slow"] == 0
    assert pool.queued() == 2
    assert pool.peak_running["slow"] == 4

    calls.release("slow")
    assert pool.wait_idle(WAIT)
    assert calls.finished == Counter({"slow": 6, "fast": 3})
    assert pool.peak_running["slow"] == 4


def test_the_total_bound_holds_across_builds() -> None:
    pool = WorkPool(total=3, per_build=2)
    calls = Calls()
    for build in ("a", "b", "c"):
        for n in range(2):
            assert pool.submit(f"{build}-{n}", build, calls.job(build))
    calls.wait_for(lambda: sum(calls.started.values()) == 3)
    assert pool.running() == 3 and pool.queued() == 3
    assert max(calls.started.values()) <= 2
    for build in ("a", "b", "c"):
        calls.release(build)
    assert pool.wait_idle(WAIT)
    assert sum(calls.finished.values()) == 6


def test_an_attempt_is_held_once_while_queued_or_running() -> None:
    pool = WorkPool(total=1, per_build=1)
    calls = Calls()
    assert pool.submit("att-1", "a", calls.job("a"))
    assert pool.submit("att-2", "a", calls.job("a"))
    calls.wait_for(lambda: calls.started["a"] == 1)
    assert not pool.submit("att-1", "a", calls.job("a"))  # running
    assert not pool.submit("att-2", "a", calls.job("a"))  # queued
    assert pool.holds("att-1") and pool.holds("att-2")
    calls.release("a")
    assert pool.wait_idle(WAIT)
    assert not pool.holds("att-1")
    assert pool.submit("att-1", "a", calls.job("a"))  # a new hint after it ran
    assert pool.wait_idle(WAIT)
    assert calls.finished["a"] == 3


def test_a_full_build_queue_drops_the_hint() -> None:
    pool = WorkPool(total=1, per_build=1, max_queued_per_build=2)
    calls = Calls()
    assert pool.submit("att-0", "a", calls.job("a"))
    calls.wait_for(lambda: calls.started["a"] == 1)
    assert pool.submit("att-1", "a", calls.job("a"))
    assert pool.submit("att-2", "a", calls.job("a"))
    assert not pool.submit("att-3", "a", calls.job("a"))  # recovery finds it due
    assert pool.submit("att-4", "b", calls.job("b"))  # another build has room
    calls.release("a")
    calls.release("b")
    assert pool.wait_idle(WAIT)
    assert calls.finished == Counter({"a": 3, "b": 1})


def test_close_drops_what_is_queued_and_waits_for_what_runs() -> None:
    pool = WorkPool(total=2, per_build=2)
    calls = Calls()
    for n in range(5):
        assert pool.submit(f"att-{n}", "a", calls.job("a"))
    calls.wait_for(lambda: calls.started["a"] == 2)
    assert pool.close() == 3
    assert not pool.submit("att-9", "a", calls.job("a"))
    assert pool.wait_running(0) == 2  # still blocked: what a grace period ending sees
    calls.release("a")
    assert pool.wait_running(WAIT) == 0
    assert calls.finished["a"] == 2
    assert pool.idle()


def test_a_failing_job_frees_its_slot() -> None:
    pool = WorkPool(total=1, per_build=1)
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("a bug in one step")

    assert pool.submit("att-1", "a", boom)
    assert pool.submit("att-2", "a", done.set)
    assert done.wait(WAIT)
    assert pool.wait_idle(WAIT)
