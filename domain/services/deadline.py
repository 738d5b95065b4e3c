"""Bounding an executor call by its deadline.

The worker passes a deadline to the executor, and must not wait past it: a
call still running at the deadline is abandoned and treated as timed out
(ambiguous), so the lease it runs under never outlives what the worker is
waiting for. A Python thread cannot be stopped, so an abandoned call may still
finish (and even apply its effect) later; its late answer is handed to a
callback, which records it as an observation, never as the truth. That an
abandoned call can still land is why a lookup's "not applied" is trusted only
after the executor build's settle window (see ``ExecutionAttempt.settles_at``).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

LateAnswer = Callable[[Any, BaseException | None], None]
"""Called with (result, error) when an abandoned call finally answers."""


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


class ThreadedCalls:
    """Runs each call on a daemon thread and stops waiting at the deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._abandoned: set[threading.Thread] = set()

    def run(self, call: Callable[[], T], timeout: float, late: LateAnswer) -> T:
        box: dict[str, Any] = {}
        state = {"abandoned": False, "done": False}

        def target() -> None:
            try:
                box["result"] = call()
            except BaseException as exc:  # handed to the waiting worker, or to ``late``
                box["error"] = exc
            with self._lock:
                state["done"] = True
                abandoned = state["abandoned"]
                self._abandoned.discard(threading.current_thread())
            if abandoned:
                late(box.get("result"), box.get("error"))

        # The call runs in a copy of the caller's context, so context variables
        # (the current trace span among them) follow it onto the thread.
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(target,), name="executor-call",
                                  daemon=True)
        thread.start()
        thread.join(max(0.0, timeout))
        with self._lock:
            if not state["done"]:
                state["abandoned"] = True
                self._abandoned.add(thread)
                raise DeadlineExceeded()
        if "error" in box:
            raise box["error"]
        result: T = box["result"]
        return result

    def abandoned(self) -> int:
        """How many abandoned calls are still running."""
        with self._lock:
            return len(self._abandoned)

    def wait_abandoned(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` seconds each) for abandoned calls to answer."""
        with self._lock:
            threads = list(self._abandoned)
        for thread in threads:
            thread.join(timeout)
        return self.abandoned() == 0
