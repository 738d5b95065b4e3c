"""What the actors see instead of the real store and executors.

``ChaosStore`` parks the running actor before commits and reads, injects
ambiguous commits (applied, then reported as failed), crashes around commits,
and tells the simulation about every successful commit. ``ChaosExecutor``
checks every call (I4-I6), may park, and may crash after the provider
applied the effect (boundary d).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from adapters.executors.fake import FakeExecutor
from adapters.store import LedgerStore
from domain.directory import DeliveryMode
from domain.errors import ExecutorNoEffect, ExecutorOutcomeUncertain, StoreUnavailable
from domain.ports import Commit, DuePage, ExecutionReceipt, ExecutionRequest
from domain.services.execution import SimulatedCrash

if TYPE_CHECKING:
    from tests.chaos.sim import Simulation


class ChaosStore:
    """The store the actors use: interleaves, injects faults and crashes, tells the oracle.

    ``inner`` is the real store; checks read it directly.
    """

    def __init__(self, inner: LedgerStore, sim: Simulation) -> None:
        self.inner = inner
        self.sim = sim

    def get(self, cls: Any, stream_id: str) -> Any:
        self.sim.yield_point("read", self.sim.profile.read_switch_rate)
        self.sim.maybe_read_fault()
        return self.inner.get(cls, stream_id)

    def get_lookup(self, key: str) -> Any:
        self.sim.yield_point("read", self.sim.profile.read_switch_rate)
        self.sim.maybe_read_fault()
        return self.inner.get_lookup(key)

    def audit_events(self, stream_id: str) -> Any:
        return self.inner.audit_events(stream_id)

    def due_work(self, now: datetime, limit: int, cursor: str | None = None) -> DuePage:
        self.sim.maybe_read_fault()
        return self.inner.due_work(now, limit, cursor)

    def commit(self, commit: Commit) -> None:
        sim = self.sim
        sim.yield_point("commit")
        fault = sim.draw_commit_fault()
        if fault == "unavailable_before":
            raise StoreUnavailable()
        if fault == "crash_before":
            raise SimulatedCrash("crash before commit")
        pending = [(agg, [type(e).__qualname__.rsplit(".", 1)[-1] for e in agg.pending_events])
                   for agg in commit.aggregates]
        self.inner.commit(commit)
        sim.after_commit(pending, commit.lookups)
        if fault == "unavailable_after":
            sim.note("ambiguous commit: applied, reported unavailable")
            raise StoreUnavailable()
        if fault == "crash_after":
            raise SimulatedCrash("crash after commit")


class ChaosExecutor:
    """A fake executor behind the simulation's checks, interleavings and crash (d).

    Like a real provider it refuses a request past its deadline (the worker's
    lease ends after the deadline), so an effect can never land after the lease
    that dispatched it expired.
    """

    def __init__(self, inner: FakeExecutor, sim: Simulation) -> None:
        self.inner = inner
        self.sim = sim
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        sim = self.sim
        generation = sim.check_call(request)
        if sim.baton.holder is not None:
            sim.baton.holder.attempt = request.attempt_id
        sim.calls.setdefault(request.idempotency_key, []).append(request.attempt_id)
        sim.yield_point("executor_before")
        if sim.clock.now() > request.deadline:
            raise ExecutorOutcomeUncertain()
        error: Exception | None = None
        receipt: ExecutionReceipt | None = None
        try:
            receipt = self.inner.execute(request)
        except Exception as exc:  # the worker sees it; the simulation only looks
            error = exc
        if sim.roll(sim.profile.crash_rate):
            sim.count("crash:after_effect")
            sim.note("crash (d): the provider answered, the worker died")
            sim.forget_answer()
            raise SimulatedCrash("after effect")
        sim.yield_point("executor_after")
        definite = (error is None or isinstance(error, ExecutorNoEffect)
                    or self.delivery_mode is DeliveryMode.OPERATOR_RECONCILIATION_ONLY)
        if definite:
            sim.returned[request.attempt_id] = generation
        if error is not None:
            raise error
        assert receipt is not None
        return receipt
