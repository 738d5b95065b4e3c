"""The worker's policy, its outcomes and its crash boundaries (for tests)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from domain.directory import DeliveryMode
from domain.ports import Executor


class CrashPoint(StrEnum):
    """Deterministic crash boundaries for tests (design.md 10, scenario 5 b, c, e).

    (a) after approval is a missed stream record; (d) after the effect and
    before the response happens inside the executor.
    """

    AFTER_LEASE = "after_lease"
    AFTER_DISPATCH_MARKER = "after_dispatch_marker"
    AFTER_RESPONSE = "after_response"


class SimulatedCrash(BaseException):
    """Raised by a crash hook: the process 'dies' here, nothing else runs."""


CrashHook = Callable[[CrashPoint, str], None]
MAX_SETTLE_SECONDS = 86_400.0
SETTLE_FLOOR_SECONDS = 30.0
"""The shortest settle window a ``correlation_lookup`` build gets when it declares
none: a provider may go on working on a request well after the client stopped
waiting (its own queue, its own timeouts), however short the client's timeout."""


def default_settle_seconds(call_seconds: float) -> float:
    """The settle window of a ``correlation_lookup`` build that declares none: at least
    as long as the call itself was allowed to take, and at least the floor."""
    call = call_seconds if math.isfinite(call_seconds) and call_seconds > 0 else 0.0
    return min(max(SETTLE_FLOOR_SECONDS, call), MAX_SETTLE_SECONDS)


def settle_seconds(executor: Executor, call_seconds: float = 0.0) -> float:
    """The build's settle window after the deadline, bounded.

    ``Executor.settle_seconds`` when the build declares one (0 only when written
    so); when it declares none (absent or None), a ``correlation_lookup`` build
    gets :func:`default_settle_seconds` of ``call_seconds`` (the time its call is
    given) and the other modes 0: only a lookup's "not applied" depends on it. A
    value that is not a finite non-negative number counts as the longest window,
    never as none."""
    value = getattr(executor, "settle_seconds", None)
    if value is None:
        if getattr(executor, "delivery_mode", None) is DeliveryMode.CORRELATION_LOOKUP:
            return default_settle_seconds(call_seconds)
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return MAX_SETTLE_SECONDS
    if not math.isfinite(value) or value < 0:
        return MAX_SETTLE_SECONDS
    return min(float(value), MAX_SETTLE_SECONDS)


class Outcome(StrEnum):
    """What one worker step did."""

    SUCCEEDED = "succeeded"
    FAILED_SAFE = "failed_safe"
    OUTCOME_UNKNOWN = "outcome_unknown"
    REQUEUED = "requeued"
    PENDING = "pending"  # dispatched, outcome not known yet: recovery takes over
    STALE = "stale"  # our lease was lost; the late result was observed only
    SKIPPED = "skipped"  # nothing to do (not due, lost a race, already settled)
    NOT_HOSTED = "not_hosted"  # due, but this worker lacks its build: left for one that has it
    MISSING = "missing"
    # handed to the process's bounded pool of attempts; its own outcome is
    # counted when it runs (adapters/work_pool.py)
    SCHEDULED = "scheduled"
    LOOKED_AGAIN = "looked_again"  # the watch of a "no effect" looked: still not found
    EFFECT_AFTER_NO_EFFECT = "effect_after_no_effect"  # ... and found the effect (I12)


@dataclass(frozen=True)
class WorkerPolicy:
    """Lease and retry bounds (from settings)."""

    lease_seconds: int = 60
    backoff_base_seconds: int = 1
    backoff_max_seconds: int = 300
    max_predispatch_leases: int = 5
    max_dispatches: int = 5
    deadline_margin_seconds: int = 2

    def backoff(self, leases_so_far: int) -> timedelta:
        seconds = self.backoff_base_seconds * 2 ** max(0, leases_so_far - 1)
        return timedelta(seconds=min(seconds, self.backoff_max_seconds))
