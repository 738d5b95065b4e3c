"""What the actors see instead of the real store and executors.

``ChaosStore`` parks the running actor before commits and reads, injects
ambiguous commits (applied, then reported as failed), crashes around commits,
and tells the simulation about every successful commit. ``ChaosExecutor``
checks every call (I4-I6), may park, may crash after the provider applied
the effect (boundary d), and answers a 401 while the credential is rotated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from adapters.executors.fake import FakeExecutor
from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.directory import DeliveryMode
from domain.errors import (
    ExecutorKeyReused,
    ExecutorNoEffect,
    ExecutorOutcomeUncertain,
    StoreUnavailable,
)
from domain.ports import Commit, DuePage, ExecutionReceipt, ExecutionRequest
from domain.proposal import Proposal
from domain.services.execution import SimulatedCrash
from domain.spec import payload_hash
from projections.audit import event_type
from tests.chaos.world import POLICY, WORKER_ACTIONS
from tests.support.stream_checks import expect

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

    def get_lookup(self, key: str, *, now: Any = None) -> Any:
        self.sim.yield_point("read", self.sim.profile.read_switch_rate)
        self.sim.maybe_read_fault()
        return self.inner.get_lookup(key, now=now)

    def audit_events(self, stream_id: str) -> Any:
        self.sim.yield_point("read", self.sim.profile.read_switch_rate)
        self.sim.maybe_read_fault()
        return self.inner.audit_events(stream_id)

    def events_at(self, keys: Any) -> Any:
        self.sim.yield_point("read", self.sim.profile.read_switch_rate)
        self.sim.maybe_read_fault()
        return self.inner.events_at(keys)

    def latest_events(self, stream_ids: Any) -> Any:
        self.sim.yield_point("read", self.sim.profile.read_switch_rate)
        self.sim.maybe_read_fault()
        return self.inner.latest_events(stream_ids)

    def stream_versions(self, stream_ids: Any) -> Any:
        self.sim.yield_point("read", self.sim.profile.read_switch_rate)
        self.sim.maybe_read_fault()
        return self.inner.stream_versions(stream_ids)

    def grant_use_shards(self) -> int:
        return self.inner.grant_use_shards()

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
        pending = [
            (agg, [type(e).__qualname__.rsplit(".", 1)[-1] for e in agg.pending_events])
            for agg in commit.aggregates
        ]
        self.inner.commit(commit)
        sim.after_commit(pending, commit.lookups)
        if fault == "unavailable_after":
            sim.note("ambiguous commit: applied, reported unavailable")
            raise StoreUnavailable()
        if fault == "crash_after":
            raise SimulatedCrash("crash after commit")


@dataclass
class Landing:
    """An abandoned call whose effect the provider may still land, until ``before``."""

    request: ExecutionRequest
    executor: FakeExecutor
    generation: int | None
    before: datetime


class ChaosExecutor:
    """A fake executor behind the simulation's checks, interleavings and crash (d).

    A request that reaches the provider past its deadline is refused. But a call
    may *overrun* (``Profile.overrun_rate``): either the worker keeps waiting while
    the call parks (others may let the lease expire and recover meanwhile) and
    the effect lands when it resumes, or the worker gives up at once and the
    provider lands the effect later (a ``land`` action). Either way an effect
    lands only before the deadline plus the build's settle window: the executor
    contract the ledger's lookup rule relies on.
    """

    def __init__(self, inner: FakeExecutor, sim: Simulation, settle_seconds: float) -> None:
        self.inner = inner
        self.sim = sim
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.settle_seconds = settle_seconds
        self.content_schema = inner.content_schema  # the build's: proposals are checked on it

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        sim = self.sim
        generation, dispatch = check_call(sim, request)
        if sim.baton.holder is not None:
            sim.baton.holder.attempt = request.attempt_id
        sim.calls.setdefault(request.idempotency_key, []).append(request.attempt_id)
        sim.yield_point("executor_before")
        if sim.clock.now() > request.deadline:
            raise ExecutorOutcomeUncertain()
        if sim.roll(sim.profile.overrun_rate):
            return self._overrun(request, generation)
        error: Exception | None = None
        receipt: ExecutionReceipt | None = None
        try:
            if sim.credential_rotated:
                # The provider no longer takes our credential: this request writes nothing.
                raise ExecutorNoEffect(reason_code="provider_rejected_401")
            receipt = self.inner.execute(request)
        except Exception as exc:  # the worker sees it; the simulation only looks
            error = exc
        if isinstance(error, ExecutorNoEffect) and dispatch > 1:
            landed = sim.effects.effect_count(request.idempotency_key) > 0
            sim.count("resend:refused_after_effect" if landed else "resend:refused")
        if sim.roll(sim.profile.crash_rate):
            sim.count("crash:after_effect")
            sim.note("crash (d): the provider answered, the worker died")
            sim.forget_answer()
            raise SimulatedCrash("after effect")
        sim.yield_point("executor_after")
        if self.definite(error, dispatch):
            sim.returned[request.attempt_id] = generation
        if error is not None:
            raise error
        assert receipt is not None
        return receipt

    def definite(self, error: Exception | None, dispatch: int) -> bool:
        """Whether the worker must record a result for this answer under its lease.

        A "nothing was written" answer is a result on the first dispatch; on a re-send
        a provider-idempotent attempt records one only for a reused key (evidence of
        the earlier effect), and otherwise leaves it to recovery (issue 26.1).
        """
        if error is None or self.delivery_mode is DeliveryMode.OPERATOR_RECONCILIATION_ONLY:
            return True
        if not isinstance(error, ExecutorNoEffect):
            return False
        if dispatch == 1:
            return True
        return (
            isinstance(error, ExecutorKeyReused)
            and self.delivery_mode is DeliveryMode.PROVIDER_IDEMPOTENCY
        )

    def _overrun(self, request: ExecutionRequest, generation: int | None) -> ExecutionReceipt:
        sim = self.sim
        settles = request.deadline + timedelta(seconds=self.settle_seconds)
        if sim.rng.random() < 0.5:
            sim.count("overrun:abandoned")
            sim.note("overrun: the worker gives up, the provider may land it later")
            sim.landings.append(Landing(request, self.inner, generation, settles))
            raise ExecutorOutcomeUncertain()  # what the worker's bound reports
        sim.count("overrun:waited")
        # The call takes until some seeded moment past its deadline (on the
        # injected clock), sometimes past the whole settle window.
        ends = request.deadline + timedelta(seconds=sim.rng.uniform(0, self.settle_seconds + 15))
        sim.clock.advance(max(0.0, (ends - sim.clock.now()).total_seconds()))
        sim.note(f"overrun: the call runs until t+{sim.elapsed()}")
        actor = sim.baton.holder
        if actor is not None:
            actor.park("executor_overrun")  # always: the interesting part is what runs now
        if sim.clock.now() >= settles:
            sim.count("landing:never")
            raise ExecutorOutcomeUncertain()  # it never reached the provider
        sim.count("landing:late")
        # Lands now; the worker may only observe it.
        landed: ExecutionReceipt = sim.watch_landing(
            request, lambda: self.inner.execute(request), observed=True
        )
        if actor is not None:
            actor.late_key = request.idempotency_key  # its answer is on the way
        return landed


def check_call(sim: Simulation, request: ExecutionRequest) -> tuple[int | None, int]:
    """I4, I5 and I6 at the moment the executor is called; returns the generation and
    the number of this dispatch (1 for the attempt's first)."""
    expect(
        sim.current_action() in WORKER_ACTIONS, f"executor called from {sim.current_action()} (I6)"
    )
    attempt = sim.store.get(ExecutionAttempt, request.attempt_id)
    expect(attempt is not None, "executor called for a missing attempt")
    assert attempt is not None
    # Never for a settled attempt: the watch of a "no effect" only looks up (I6, I8).
    expect(
        attempt.status.value == "executing",
        f"{attempt.id}: executor called while the attempt is {attempt.status.value}",
    )
    expect(request.idempotency_key == attempt.idempotency_key, "foreign idempotency key")
    proposal = sim.store.get(Proposal, attempt.proposal_id)
    assert proposal is not None
    record = proposal.versions[attempt.proposal_version]
    expect(
        request.spec.canonical_dict() == record["spec"]
        and payload_hash(request.spec) == attempt.payload_hash == record["payload_hash"]
        and attempt.view_hash == record["view_hash"],
        f"{attempt.id}: executor got a spec other than the approved one (I4)",
    )
    marked = False
    generation: int | None = None
    dispatches = 0
    for event in sim.store.events(attempt.id):
        data = event.data()  # type: ignore[attr-defined]
        if event_type(event) == "Leased":  # type: ignore[arg-type]
            deadline = datetime.fromisoformat(data["expires_at"].replace("Z", "+00:00"))
            deadline -= timedelta(seconds=POLICY.deadline_margin_seconds)
            generation = data["generation"] if deadline == request.deadline else None
        elif event_type(event) == "DispatchStarted":  # type: ignore[arg-type]
            dispatches += 1
            marked = marked or data["generation"] == generation
    expect(marked, f"{attempt.id}: executor called without its generation's marker (I5)")
    return generation, dispatches
