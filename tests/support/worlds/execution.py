"""Crash injection and helpers for the execution scenarios."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adapters.executors.fake import EffectLedger, FakeExecutor, fake_build_digest
from domain.attempt import ExecutionAttempt
from domain.ports import ExecutionReceipt, ExecutionRequest
from domain.services.approval import approve
from domain.services.execution import CrashPoint, SimulatedCrash, Worker, WorkerPolicy
from domain.services.recovery import RecoveryReport, run_recovery
from tests.support.worlds.approval import World

MODES = {
    "provider_idempotency": "fake.provider_idempotency",
    "correlation_lookup": "fake.correlation_lookup",
    "operator_reconciliation_only": "fake.operator_only",
}
LEASE = 60


class CrashAt:
    """A crash hook that kills the worker once at one boundary."""

    def __init__(self, point: CrashPoint | None) -> None:
        self.point = point
        self.fired = 0

    def __call__(self, point: CrashPoint, attempt_id: str) -> None:
        if point is self.point and not self.fired:
            self.fired += 1
            raise SimulatedCrash(point.value)


class CrashAfterEffect:
    """Boundary (d): the provider applies the effect, then the worker dies."""

    def __init__(self, inner: FakeExecutor) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.armed = True

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        receipt = self.inner.execute(request)
        if self.armed:
            self.armed = False
            raise SimulatedCrash("after_effect")
        return receipt


class DuringCall:
    """Runs ``action`` inside the first executor call (e.g. let the lease expire)."""

    def __init__(self, inner: Any, action: Callable[[], None]) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.action: Callable[[], None] | None = action

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        action, self.action = self.action, None
        if action is not None:
            action()
        result: ExecutionReceipt = self.inner.execute(request)
        return result


@dataclass
class ExecutionWorld(World):
    """The approval world plus real fake executors and their effect ledger."""

    effects: EffectLedger = field(default_factory=EffectLedger)

    def worker(self, crash: CrashAt | None = None, **policy: Any) -> Worker:
        return Worker(self.ctx, WorkerPolicy(lease_seconds=LEASE, **policy), crash_hook=crash)

    def approved(self, mode: str, simulate: str = "success") -> str:
        capability = MODES[mode]
        proposal_id = self.propose(
            capability=capability,
            executor_build=fake_build_digest(capability),
            content={"title": "Buy milk", "simulate": simulate},
        )
        token = self.present(proposal_id).token
        return approve(self.ctx, token=token, provenance=self.who).attempt_id

    def attempt(self, attempt_id: str) -> ExecutionAttempt:
        found = self.store.get(ExecutionAttempt, attempt_id)
        assert found is not None
        return found

    def topics(self, attempt_id: str) -> list[str]:
        return [e.topic.rsplit(".", 1)[-1] for e in self.store.read_stream(attempt_id)]

    def swap_executor(self, capability: str, wrapper: Callable[[Any], Any]) -> Any:
        """Replace a registered executor by a wrapper around it."""
        assert self.registry is not None
        current = self.registry.get(capability, fake_build_digest(capability))
        wrapped = wrapper(current)
        self.registry.replace(wrapped)
        return wrapped

    def recover_after_lease(self, worker: Worker | None = None) -> RecoveryReport:
        self.clock.advance(LEASE + 1)
        return run_recovery(worker or self.worker())

    def keys_called(self, attempt_id: str) -> set[str]:
        key = self.attempt(attempt_id).idempotency_key
        return {k for _, k in self.effects.calls if k == key}

    def calls_for(self, attempt_id: str) -> int:
        key = self.attempt(attempt_id).idempotency_key
        return sum(1 for _, k in self.effects.calls if k == key)
