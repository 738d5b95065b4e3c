"""Bounding an executor call by its deadline.

The worker passes a deadline to the executor, and must not wait past it: a
call still running at the deadline is abandoned and treated as timed out
(ambiguous), so the lease it runs under never outlives what the worker is
waiting for. A Python thread cannot be stopped, so an abandoned call may still
finish (and even apply its effect) later; its late answer is handed to a
callback, which records it as an observation, never as the truth. That an
abandoned call can still land is why a lookup's "not applied" is trusted only
after the executor build's settle window (see ``ExecutionAttempt.settles_at``).

Calls run on long-lived threads of a process-wide pool: starting and joining
a thread for every call cost more than many calls themselves. The pool never
makes a call wait for a thread (one is started when none is idle), so any
number of calls may run at once, exactly as with a thread per call; an
abandoned call keeps its thread until it answers, and only then is the thread
reused.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

LateAnswer = Callable[[Any, BaseException | None], None]
"""Called with (result, error) when an abandoned call finally answers."""

MAX_IDLE_THREADS = 8
"""Idle call threads kept for reuse; a thread that finds this many idle ends."""


class DeadlineExceeded(Exception):
    """The executor call did not answer by its deadline; the outcome is ambiguous."""


class CallRunner(Protocol):
    """Runs one executor call, waiting at most ``timeout`` seconds for it."""

    def run(self, call: Callable[[], T], timeout: float, late: LateAnswer) -> T: ...


class InlineCalls:
    """Calls in the caller's thread, unbounded: for deterministic simulations whose
    executors keep the deadline on the injected clock themselves."""

    def run(self, call: Callable[[], T], timeout: float, late: LateAnswer) -> T:
        return call()


class _Call:
    """One call handed to a pool thread: its answer, and who waits for it."""

    __slots__ = (
        "abandoned",
        "answered",
        "call",
        "context",
        "done",
        "error",
        "finished",
        "late",
        "owner",
        "ready",
        "result",
        "stays",
    )

    def __init__(self, call: Callable[[], Any], late: LateAnswer, owner: ThreadedCalls) -> None:
        self.call = call
        # A copy of the caller's context, so context variables (the current
        # trace span among them) follow the call onto the pool thread.
        self.context = contextvars.copy_context()
        self.late = late
        self.owner = owner
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.abandoned = False
        self.answered = threading.Lock()  # released when the call has answered
        self.answered.acquire()
        self.finished: threading.Event | None = None  # set once an abandoned call is through
        # Set by the pool: called on its thread once the call is through, before
        # the waiting worker is answered, so the thread is idle again before that
        # worker can hand the pool its next call; says whether the thread stays.
        self.ready: Callable[[], bool] | None = None
        self.stays = False

    def execute(self) -> None:
        # The late callback too runs in the caller's context, as the call did.
        self.context.run(self._execute)

    def _execute(self) -> None:
        try:
            self.result = self.call()
        except BaseException as exc:  # handed to the waiting worker, or to ``late``
            self.error = exc
        self.owner.answered(self)

    def through(self) -> None:
        """The call is through on its pool thread: let the pool count it idle."""
        self.stays = self.ready() if self.ready is not None else False


class CallThreads:
    """Long-lived daemon threads that run calls; a new one starts whenever none
    is idle, so a call never waits for another call to finish."""

    def __init__(self, max_idle: int = MAX_IDLE_THREADS) -> None:
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._idle = 0
        self._jobs: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._started = 0

    def submit(self, job: _Call) -> None:
        with self._lock:
            if self._idle:
                # An idle thread is, or is about to be, waiting on the queue:
                # exactly one of them takes this job.
                self._idle -= 1
                self._jobs.put(job)
                return
            self._started += 1
        threading.Thread(target=self._serve, args=(job,), name="executor-call", daemon=True).start()

    def _serve(self, job: _Call | None) -> None:
        while job is not None:
            job.ready = self._ready
            job.execute()
            if not job.stays:
                return
            job = self._jobs.get()

    def _ready(self) -> bool:
        with self._lock:
            if self._idle >= self._max_idle:
                return False
            self._idle += 1
            return True

    def started(self) -> int:
        """How many threads this pool has started (a measure of reuse)."""
        with self._lock:
            return self._started

    def close(self) -> None:
        """End the idle threads (busy ones end when their call answers)."""
        with self._lock:
            idle, self._idle, self._max_idle = self._idle, 0, 0
        for _ in range(idle):
            self._jobs.put(None)


_shared: CallThreads | None = None
_shared_lock = threading.Lock()


def shared_call_threads() -> CallThreads:
    """The process's pool; its threads start on first use (nothing runs at import)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = CallThreads()
        return _shared


def _forget_shared_in_child() -> None:
    # A forked child has none of its parent's threads: counting the parent's
    # idle threads would queue its calls for no one. It starts a pool of its own.
    global _shared, _shared_lock
    _shared, _shared_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_shared_in_child)


class ThreadedCalls:
    """Runs each call on a thread of the shared pool and stops waiting at the deadline."""

    def __init__(self, threads: CallThreads | None = None) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._abandoned: set[_Call] = set()

    def run(self, call: Callable[[], T], timeout: float, late: LateAnswer) -> T:
        job = _Call(call, late, self)
        (self._threads or shared_call_threads()).submit(job)
        answered = job.answered.acquire(timeout=max(0.0, timeout))
        if not answered:
            with self._lock:
                if not job.done:
                    job.abandoned = True
                    job.finished = threading.Event()
                    self._abandoned.add(job)
                    raise DeadlineExceeded()
        if job.error is not None:
            raise job.error
        result: T = job.result
        return result

    def answered(self, job: _Call) -> None:
        """On the pool thread: hand the answer to the waiting worker, or to ``late``."""
        with self._lock:
            job.done = True
            abandoned = job.abandoned
        if not abandoned:
            job.through()  # idle before the worker can submit its next call
            job.answered.release()
            return
        try:
            # A background thread: the callback's own failure must not end the pool's thread.
            with contextlib.suppress(Exception):
                job.late(job.result, job.error)
        finally:
            with self._lock:
                self._abandoned.discard(job)
            assert job.finished is not None
            job.through()
            job.finished.set()

    def abandoned(self) -> int:
        """How many abandoned calls have not answered yet."""
        with self._lock:
            return len(self._abandoned)

    def wait_abandoned(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` seconds each) for abandoned calls to answer."""
        with self._lock:
            pending = [job.finished for job in self._abandoned if job.finished is not None]
        for finished in pending:
            finished.wait(timeout)
        return self.abandoned() == 0
