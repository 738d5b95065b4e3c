"""A seeded simulation of everyone who touches the ledger, one actor at a time.

One ``random.Random(seed)`` decides every step: approvers (with duplicate,
sibling, wrong-provenance and unknown-token approvals), three workers (two of
which host only some builds) fed by a lossy, duplicating, reordering stream,
recovery ticks, clock jumps past lease expiry, crashes at the five boundaries
(and at any commit), ambiguous commits (applied, then reported as failed),
admin reconcile / resolve, directory changes and the projector, and executor
calls that outlive their deadline (the worker waits on, or gives up and the
provider lands the effect later), and a provider that refuses every request
while its credential is rotated, or refuses a re-send after an earlier dispatch
landed (a 401, a reused key's 422). Every action is an actor on its own thread,
but only one runs at a time (``tests.chaos.interleave``): at every commit,
read, executor call and worker crash point an actor may park while others start
or resume, so the races the real system's processes can have are schedules
here, and the same seed always gives the same run.

After every step the oracle checks I1-I9 on the raw store, and that no
attempt is settled as "no effect" (``failed_safe``, or resolved ``no_effect``
without the admin having seen it) while the fake provider holds an effect for
its key, unless it was flagged ``effect_after_no_effect``; at the end the
fake effect ledger is checked and recovery must settle every attempt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from adapters.executors.fake import (
    FAKE_CAPABILITIES,
    EffectLedger,
    FakeExecutor,
    FakeReconciler,
)
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from domain.approvals import ApprovalKind, kind_of
from domain.attempt import ExecutionAttempt
from domain.directory import DeliveryMode
from domain.errors import LedgerError, StoreUnavailable
from domain.ports import Lookup
from domain.proposal import Proposal
from domain.services.approval import Provenance
from domain.services.authorization import Basis, authorize
from domain.services.context import ServiceContext
from domain.services.deadline import InlineCalls
from domain.services.directory import put_record
from domain.services.execution import CrashPoint, SimulatedCrash, Worker
from domain.services.recovery import run_recovery
from domain.spec import parse_spec, parse_utc, payload_hash
from projections.ports import ViewStore
from projections.projector import Projector
from tests.chaos.actions import Actions
from tests.chaos.escalations import EscalationActions
from tests.chaos.interleave import Actor, Baton
from tests.chaos.late import LateEffects
from tests.chaos.oracle import Oracle
from tests.chaos.policies import PolicyActions
from tests.chaos.world import (
    ALLOWED,
    DIRECTORY,
    LEASE,
    POLICY,
    SETTLE_SECONDS,
    START,
    STATIC_DIRECTORY,
    WATCH,
    Profile,
    SeededTokens,
)
from tests.chaos.wrappers import ChaosExecutor, ChaosStore, Landing
from tests.support.clocks import FixedClock
from tests.support.stream_checks import TERMINAL, Violation, expect


@dataclass
class Simulation(Actions, LateEffects, PolicyActions, EscalationActions):
    """One schedule: ``run()`` returns its trace; a Violation names the broken invariant."""

    seed: int
    store: LedgerStore
    views: ViewStore
    profile: Profile = field(default_factory=Profile)
    on_arm: Callable[[bool], None] | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.clock = FixedClock(START)
        self.tokens = SeededTokens(random.Random(f"tokens-{self.seed}"))
        self.effects = EffectLedger()
        registry = StaticExecutorRegistry()
        # Two workers host only some builds, as in a rolling deploy (I11): an
        # attempt must never fail because one of them saw it first.
        partial = [StaticExecutorRegistry(), StaticExecutorRegistry()]
        for capability, mode in FAKE_CAPABILITIES.items():
            reconciler = (
                FakeReconciler(self.effects) if mode is DeliveryMode.CORRELATION_LOOKUP else None
            )
            fake = FakeExecutor(capability, self.effects, self.clock)  # slow moves the clock
            executor = ChaosExecutor(fake, self, SETTLE_SECONDS[capability])
            registry.register(executor, reconciler)
            hosted_by = partial[0] if mode is DeliveryMode.PROVIDER_IDEMPOTENCY else partial[1]
            hosted_by.register(executor, reconciler)
        self.chaos = ChaosStore(self.store, self)
        self.ctx = ServiceContext(
            store=self.chaos,
            clock=self.clock,
            tokens=self.tokens,
            permissions=frozenset({"tasks.write", "social.post"}),
            registry=registry,
            no_effect_watch=WATCH,
        )
        self.check_ctx = ServiceContext(
            store=self.store,
            clock=self.clock,
            tokens=self.tokens,
            permissions=self.ctx.permissions,
            registry=registry,
        )
        # Calls run inline: the simulation itself decides when a call outlives its
        # deadline (ChaosExecutor), on the injected clock, so a seed replays exactly.
        self.workers = [
            Worker(
                dataclasses.replace(self.ctx, registry=hosting),
                POLICY,
                crash_hook=self.crash_hook,
                calls=InlineCalls(),
            )
            for hosting in (registry, *partial)
        ]
        self.projector = Projector(self.store, self.views)
        self.oracle = Oracle(self.store, self.views, POLICY)
        self.armed = False
        self.baton = Baton()
        self.actors: list[Actor] = []
        self.started = 0
        self.main_action = "setup"  # what the scheduler thread itself is doing
        self.trace: list[str] = []
        self.touched: dict[str, None] = {}
        self.proposals: list[str] = []
        self.attempts: list[str] = []
        self.presentations: list[str] = []
        self.presented: dict[str, tuple[str, Provenance]] = {}  # token -> proposal, binding
        self.used_tokens: list[str] = []
        self.deliveries: list[str] = []
        self.projection_hints: list[str] = []
        self.calls: dict[str, list[str]] = {}
        self.returned: dict[str, int | None] = {}  # attempt -> generation whose call answered
        self.landings: list[Landing] = []  # abandoned calls the provider may still land
        self.overdue: list[Landing] = []  # ... past their settle window
        self.admin_saw: dict[str, int] = {}  # effects seen before resolving no_effect
        self.unseen: set[str] = set()  # keys with an effect no answer will ever report
        self.watched: set[str] = set()  # ... that only a later lookup can find (I12)
        self.beyond_watch: set[str] = set()  # ... landed when nothing could look again
        self.reporting: set[str] = set()  # keys whose landed call is still answering
        self.credential_rotated = False  # the provider refuses every request (401)
        self.counts: dict[str, int] = {}
        self.grant_ids: list[str] = []
        self.revoked_grants: set[str] = set()

    # -- randomness --------------------------------------------------------

    def roll(self, rate: float) -> bool:
        return self.armed and self.rng.random() < rate

    def note(self, text: str) -> None:
        actor = self.baton.holder
        self.trace.append(f"  #{actor.number} {text}" if actor else f"  {text}")

    def current_action(self) -> str:
        actor = self.baton.holder
        return actor.name if actor is not None else self.main_action

    def count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def arm(self, on: bool) -> None:
        self.armed = on
        if not on:
            self.credential_rotated = False  # the ledger is given the new credential
        if self.on_arm is not None:
            self.on_arm(on)

    # -- hooks the store, executor and workers call ----------------------------

    def maybe_read_fault(self) -> None:
        if self.roll(self.profile.read_fault_rate):
            self.count("fault:read_unavailable")
            self.forget_answer()  # this worker may legitimately fail to record now
            raise StoreUnavailable()

    def draw_commit_fault(self) -> str | None:
        if not self.roll(self.profile.fault_rate + self.profile.crash_rate):
            return None
        fault = self.rng.choice(
            ("unavailable_before", "unavailable_after", "crash_before", "crash_after")
        )
        self.count(f"fault:{fault}")
        self.forget_answer()
        return fault

    def forget_answer(self) -> None:
        """A fault or crash hit the running worker: it may now fail to record its answer."""
        actor = self.baton.holder
        if actor is None:
            self.returned.clear()
        elif actor.attempt is not None:
            self.returned.pop(actor.attempt, None)

    def yield_point(self, where: str, rate: float | None = None) -> None:
        """An actor may park here and let others run (never the scheduler itself)."""
        actor = self.baton.holder
        if actor is None or not self.roll(self.profile.switch_rate if rate is None else rate):
            return
        self.count(f"switch:{where}")
        actor.park(where)

    def crash_hook(self, point: CrashPoint, attempt_id: str) -> None:
        if self.roll(self.profile.crash_rate):
            self.count(f"crash:{point.value}")
            self.note(f"crash at {point.value}")
            self.forget_answer()
            raise SimulatedCrash(point.value)
        self.yield_point(point.value)

    def after_commit(
        self, pending: Sequence[tuple[Any, list[str]]], lookups: Sequence[Lookup]
    ) -> None:
        """Right after a successful commit: nothing else can have run in between."""
        self.grant_commit(pending)
        for aggregate, kinds in pending:
            self.oracle.committed(aggregate)
            self.touched[aggregate.id] = None
            if isinstance(aggregate, ExecutionAttempt):
                if aggregate.id not in self.attempts:
                    self.attempts.append(aggregate.id)
                self.projection_hints.append(aggregate.id)
                if "Queued" in kinds or "Requeued" in kinds:
                    self.deliveries.append(aggregate.id)
                if "DispatchStarted" in kinds:
                    self.check_authorized(aggregate, "dispatch")
                    self.check_marker_grant(aggregate)
            if isinstance(aggregate, Proposal) and aggregate.id not in self.proposals:
                self.proposals.append(aggregate.id)
            if isinstance(aggregate, Proposal) and {"Escalated", "Claimed", "VoteRecorded"} & {
                *kinds
            }:
                self.check_escalations(aggregate.id)
                if "Escalated" in kinds:
                    stored = self.store.get(Proposal, aggregate.id)
                    assert stored is not None
                    self.check_escalated_when_due(stored)
        for _, kinds in pending:
            if "Claimed" in kinds:
                attempt = next(a for a, _ in pending if isinstance(a, ExecutionAttempt))
                self.check_authorized(attempt, "approval")

    def check_authorized(self, attempt: ExecutionAttempt, when: str) -> None:
        """I7: the directory as committed authorizes the attempt at approval and dispatch."""
        proposal = self.store.get(Proposal, attempt.proposal_id)
        assert proposal is not None
        record = proposal.versions[attempt.proposal_version]
        spec = parse_spec(record["spec"])
        expect(payload_hash(spec) == attempt.payload_hash, f"{attempt.id}: hash drift at {when}")
        who = Provenance(
            attempt.actor_id,
            attempt.identity_binding_id,
            attempt.channel_binding_id,
            attempt.conversation_key,
        )
        self.check_not_forbidden(attempt, when)
        if when == "approval" and kind_of(attempt.approval) is ApprovalKind.QUORUM:
            self.check_quorum(attempt)
        if when == "approval":
            self.check_escalated_claim(attempt)
        # Decided at the event's own time: the clock may move before the write lands.
        decided = attempt.dispatch_started_at if when == "dispatch" else attempt.created_at
        assert decided is not None
        try:
            authorize(
                self.check_ctx, who, spec, parse_utc(decided), basis=Basis.of(attempt.approval)
            )
        except Exception as exc:
            raise Violation(
                f"{attempt.id}: {when} committed while unauthorized "
                f"({type(exc).__name__}: {exc}) (I7)"
            ) from None

    # -- actions -------------------------------------------------------------

    def tick(self) -> None:
        """Resume a parked actor or start a new one; judge it if it finished."""
        live = [a for a in self.actors if not a.done]
        # A call that overruns its deadline is slow: it is resumed less often, so
        # clock jumps and recovery ticks get to run while it is in flight.
        slow = [a for a in live if a.parked_at == "executor_overrun"]
        if slow and len(live) < self.profile.max_actors and self.rng.random() < 0.7:
            live = [a for a in live if a not in slow]
        if live and (
            len(live) >= self.profile.max_actors or self.rng.random() < self.profile.resume_rate
        ):
            actor = self.rng.choice(live)
            self.trace.append(f"resume #{actor.number} {actor.name} parked at {actor.parked_at}")
        else:
            name, action = self.pick()
            self.started += 1
            actor = Actor(self.baton, self.started, name, action)
            self.actors.append(actor)
            self.trace.append(f"start #{actor.number} {name}")
            self.count(f"action:{name}")
        self.baton.resume(actor)
        if actor.done:
            self.finish(actor)

    def finish(self, actor: Actor) -> None:
        actor.join()
        self.actors.remove(actor)
        error, name = actor.error, actor.name
        if actor.late_key is not None and error is not None:
            # A call landed late, then the worker crashed or the store failed before
            # its answer was written: nobody can learn of that effect any more.
            self.count("landing:answer_lost")
            self.unseen.add(actor.late_key)
        if error is None:
            if actor.result:
                self.trace.append(f"  #{actor.number} -> {actor.result}")
        elif isinstance(error, SimulatedCrash):
            self.trace.append(f"  #{actor.number} -> crashed ({error})")
        elif isinstance(error, LedgerError) and error.code in ALLOWED[name]:
            self.trace.append(f"  #{actor.number} -> {error.code}")
            self.count(f"refused:{name}:{getattr(error, 'reason', error.code)}")
        elif isinstance(error, LedgerError):
            raise Violation(f"{name} raised {type(error).__name__}: {error.detail}") from error
        else:
            raise error

    def finish_all(self) -> None:
        """Let every parked actor run to its end, in a seeded order."""
        for _ in range(10_000):
            live = [a for a in self.actors if not a.done]
            if not live:
                return
            actor = self.rng.choice(live)
            self.trace.append(f"resume #{actor.number} {actor.name} parked at {actor.parked_at}")
            self.baton.resume(actor)
            if actor.done:
                self.finish(actor)
            self.check()
        raise Violation("actors never finished")

    def check_results_recorded(self) -> None:
        """Once every worker has returned: a call that answered definitely while its
        generation still holds the lease must have its result recorded (no lost
        transition). Any injected fault or crash since then clears the claim."""
        returned, self.returned = self.returned, {}
        for attempt_id, generation in returned.items():
            attempt = self.store.get(ExecutionAttempt, attempt_id)
            assert attempt is not None
            expect(
                not (generation is not None and attempt.holds_lease(generation, self.clock.now())),
                f"{attempt_id}: generation {generation} got a definite answer and still "
                f"holds the lease, but recorded no result (lost transition)",
            )

    def setup(self) -> None:
        for kind, record_id, good, _ in DIRECTORY:
            put_record(self.chaos, self.clock, kind=kind, record_id=record_id, values=good)
        for kind, record_id, values in STATIC_DIRECTORY:
            put_record(self.chaos, self.clock, kind=kind, record_id=record_id, values=values)
        self.check()

    def check(self) -> None:
        if not self.actors:
            self.check_results_recorded()
        touched, self.touched = list(self.touched), {}
        self.oracle.check_streams(touched)
        proposals = [p for p in self.proposals if p in touched]
        if proposals:
            self.oracle.check_proposals(proposals, self.clock.now())
        attempts = [a for a in self.attempts if a in touched]
        if attempts and self.profile.check_due_every_step:
            self.oracle.check_due(attempts, self.clock.now() + timedelta(days=3650))
        if attempts:
            self.oracle.check_views(attempts)
        expect(self.effects.max_effects_per_key() <= 1, "an idempotency key has two effects")
        self.check_no_late_effect_lost()
        self.check_grants()

    def run(self) -> list[str]:
        self.setup()
        self.arm(True)
        try:
            for number in range(self.profile.steps):
                self.trace.append(f"tick {number} t+{self.elapsed()}")
                self.tick()
                self.check()
            self.finish_all()
        finally:
            self.arm(False)
            self.abandon()
        self.land_the_rest()
        self.drain()
        self.drain_watches()
        self.final_checks()
        return self.trace

    def abandon(self) -> None:
        """After a failure: let parked threads run out (unarmed) so none is left behind."""
        for actor in list(self.actors):
            if not actor.done:
                with contextlib.suppress(Exception):  # the schedule already failed
                    self.baton.resume(actor)

    def elapsed(self) -> int:
        return int((self.clock.now() - START).total_seconds())

    def drain(self) -> None:
        """No more faults: enough recovery ticks must settle every attempt."""
        self.trace.append("drain")
        self.main_action = "recover"
        try:
            for _ in range(self.profile.drain_rounds):
                if all(self.status(a) in (*TERMINAL, "outcome_unknown") for a in self.attempts):
                    break
                self.clock.advance(max(LEASE, POLICY.backoff_max_seconds) + 1)
                report = run_recovery(self.workers[0])
                expect(not report.outcomes.get("error"), f"recovery raised: {report}")
                self.note(f"recovery examined {report.examined}")
                self.check()
        finally:
            self.main_action = "checks"
        for attempt_id in self.attempts:
            status = self.status(attempt_id)
            expect(
                status in (*TERMINAL, "outcome_unknown"),
                f"{attempt_id}: still {status} after {self.profile.drain_rounds} recovery ticks",
            )

    def status(self, attempt_id: str) -> str:
        attempt = self.store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None
        return attempt.status.value

    def final_checks(self) -> None:
        """Every stream again, the effect ledger against the outcomes, views rebuilt."""
        self.oracle.check_streams(list(self.oracle.live))
        self.oracle.check_proposals(self.proposals, self.clock.now())
        for proposal_id in self.proposals:
            self.check_escalations(proposal_id)
        self.oracle.check_due(self.attempts, self.clock.now() + timedelta(days=3650))
        for key, attempt_ids in self.calls.items():
            expect(len(set(attempt_ids)) == 1, f"{key}: one idempotency key, several attempts")
        for attempt_id in self.attempts:
            summary = self.oracle.summaries[attempt_id]
            effects = self.effects.effect_count(summary.idempotency_key)
            expect(effects <= 1, f"{attempt_id}: {effects} effects for one key")
            if summary.status == "succeeded":
                expect(effects == 1, f"{attempt_id}: succeeded without an effect")
            if summary.status == "failed_safe":
                expect(
                    effects == 0 or summary.idempotency_key in self.beyond_watch,
                    f"{attempt_id}: failed_safe but the effect exists",
                )
            if summary.status == "effect_after_no_effect":
                expect(effects == 1, f"{attempt_id}: flagged a late effect that does not exist")
            if summary.mode is not DeliveryMode.PROVIDER_IDEMPOTENCY:
                calls = len(self.calls.get(summary.idempotency_key, []))
                expect(calls <= 1, f"{attempt_id}: {calls} calls in {summary.mode.value}")
            self.projector.project_attempt(attempt_id)
            self.count(f"final:{summary.status}")
        self.check_no_late_effect_lost(final=True)
        self.oracle.check_views(self.attempts, exact=True)

    def digest(self) -> str:
        """A fingerprint of the whole run (deterministic replay)."""
        return hashlib.sha256("\n".join(self.trace).encode()).hexdigest()
