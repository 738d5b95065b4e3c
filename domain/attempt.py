"""The ExecutionAttempt aggregate: the one attempt per approved proposal version.

```
queued -> executing -> succeeded
                    -> failed_safe
                    -> outcome_unknown
outcome_unknown -> succeeded | failed_safe   (read-only reconciliation)
                -> manually_resolved          (admin)
failed_safe | manually_resolved(no_effect) -> effect_after_no_effect
                                              (a success observed afterwards)
```

A provider's "nothing was written" is proof of no effect only on the first
dispatch: a re-send's refusal speaks for that request alone, while the earlier
dispatch whose answer was lost may have landed (``no_write_is_proof``).

A lookup's "not applied" is proof only once no call of the dispatching
generation can still be in flight: the dispatch marker records the call's
deadline and the executor build's settle window after it (``settles_at``);
before then the attempt stays due. A success seen after a terminal "no effect"
is never kept silently: the attempt moves to ``effect_after_no_effect``, on the
attention list.

A lookup's "not applied" is also watched (I12): a ``correlation_lookup`` attempt
settled ``failed_safe`` by a lookup, or resolved ``no_effect`` by an admin,
carries the watch plan on that settling event (offsets in seconds), stays in the
due-work index, and is looked up again, read-only, at each offset
(``LookedAgain``); a look that finds the effect moves it to
``effect_after_no_effect``. The plan is bounded, so the watch ends.

A restored backup can be older than what happened (I17): an attempt that was
not settled at the restored point may have been dispatched since. The restore
marks it ``PossiblyDispatched``: it counts as dispatched (a lease of it has
expired, its next "nothing was written" is a re-send's), so recovery retries
with the same key, looks it up first, or records ``outcome_unknown``, by
delivery mode, and never dispatches it blindly.

Only the current, unexpired lease generation may mark dispatch or record a
result (I5). A stale generation's result is kept as a non-authoritative
observation and never overwrites the truth (I8).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from eventsourcing.domain import event

from domain.base import LedgerAggregate
from domain.directory import DeliveryMode
from domain.errors import IllegalTransition, NotOutcomeUnknown, StaleRevision
from domain.timeutil import format_utc, is_past, parse_utc

MAX_LEASE_HISTORY = 8


class AttemptStatus(StrEnum):
    """Where an attempt is in its life."""

    QUEUED = "queued"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED_SAFE = "failed_safe"
    OUTCOME_UNKNOWN = "outcome_unknown"
    MANUALLY_RESOLVED = "manually_resolved"
    EFFECT_AFTER_NO_EFFECT = "effect_after_no_effect"


# Never executed again. ``effect_after_no_effect`` is settled too (nothing is
# dispatched again), but waits on the attention list for an admin's resolution.
TERMINAL = frozenset(
    {
        AttemptStatus.SUCCEEDED,
        AttemptStatus.FAILED_SAFE,
        AttemptStatus.MANUALLY_RESOLVED,
        AttemptStatus.EFFECT_AFTER_NO_EFFECT,
    }
)

# What an admin may resolve.
RESOLVABLE = frozenset({AttemptStatus.OUTCOME_UNKNOWN, AttemptStatus.EFFECT_AFTER_NO_EFFECT})


RESULT_STATUSES = frozenset(
    {AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE, AttemptStatus.OUTCOME_UNKNOWN}
)


class Resolution(StrEnum):
    """An admin's verdict on an uncertain outcome."""

    EFFECT_APPLIED = "effect_applied"
    NO_EFFECT = "no_effect"


WATCH_SOURCE = "watch"  # the source of an EffectAfterNoEffect a watched lookup found


class ExecutionAttempt(LedgerAggregate):
    """State of one attempt, rebuilt from its stream."""

    @staticmethod
    def create_id(attempt_id: str, **_: Any) -> str:
        return attempt_id

    @event("Queued")
    def __init__(
        self,
        attempt_id: str,
        proposal_id: str,
        proposal_version: int,
        payload_hash: str,
        view_hash: str,
        idempotency_key: str,
        capability: str,
        executor_build: str,
        delivery_mode: str,
        actor_id: str,
        identity_binding_id: str,
        channel_binding_id: str,
        conversation_key: str,
        permission: str,
        target_id: str | None,
        target_revision: str | None,
        at: str,
        trace_context: dict[str, str] | None = None,
        spec: dict[str, Any] | None = None,
        authorized: list[list[Any]] | None = None,
        approval: dict[str, Any] | None = None,
    ) -> None:
        # trace_context came later: a Queued event stored before it has no such
        # field, replays with None, and keeps its hash (data() is what was stored).
        # So did ``spec`` (the approved, stored spec) and ``authorized`` (the
        # approval's read set, [stream id, version] pairs): what the pre-dispatch
        # recheck needs without reading the proposal and every directory stream.
        # Without them (older events) the recheck reads as it always did.
        # ``approval`` too: how the version was approved (domain.approvals; None
        # before approval kinds existed, a human approval).
        self.approval = approval
        self.trace_context = trace_context
        self.spec = spec
        self.authorized: list[tuple[str, int]] | None = (
            None if authorized is None else [(str(i), int(v)) for i, v in authorized]
        )
        self.proposal_id = proposal_id
        self.proposal_version = proposal_version
        self.payload_hash = payload_hash
        self.view_hash = view_hash
        self.idempotency_key = idempotency_key
        self.capability = capability
        self.executor_build = executor_build
        self.delivery_mode = DeliveryMode(delivery_mode)
        self.actor_id = actor_id
        self.identity_binding_id = identity_binding_id
        self.channel_binding_id = channel_binding_id
        self.conversation_key = conversation_key
        self.permission = permission
        self.target_id = target_id
        self.target_revision = target_revision
        self.status = AttemptStatus.QUEUED
        self.created_at = at
        self.updated_at = at
        self.not_before: str = at
        self.lease_generation = 0
        self.lease_owner: str | None = None
        self.lease_expires_at: str | None = None
        self.lease_history: list[dict[str, Any]] = []
        self.predispatch_leases = 0
        self.dispatch_started_at: str | None = None
        self.dispatch_deadline: str | None = None
        self.settles_at: str | None = None
        self.dispatched_generation: int | None = None
        self.dispatch_count = 0
        self.result: dict[str, Any] | None = None
        self.resolution: dict[str, Any] | None = None
        self.acknowledgement: dict[str, Any] | None = None
        self.observations = 0
        # The watch of a "no effect" settlement (I12): its plan (seconds after
        # ``watch_from``) and how many looks were taken.
        self.watch: list[int] | None = None
        self.watch_from: str | None = None
        self.watch_looks = 0
        # Restores that found this attempt unsettled (I17): each id once.
        self.restores: list[str] = []

    # -- queries -------------------------------------------------------------

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def dispatched(self) -> bool:
        """True once any generation has marked dispatch, or a restore found the attempt
        unsettled (it may have been dispatched after the backup): an effect may exist."""
        return self.dispatch_started_at is not None or bool(self.restores)

    @property
    def no_write_is_proof(self) -> bool:
        """Whether a provider's "this request wrote nothing" proves the attempt had no
        effect: only for its first dispatch. A re-send's refusal (a 401 after a
        credential rotation, a 422 for a reused key) says nothing of what an
        earlier dispatch, whose answer was lost, did."""
        return self.dispatch_count <= 1

    def lease_expired(self, now: datetime) -> bool:
        return self.lease_expires_at is not None and is_past(self.lease_expires_at, now)

    def holds_lease(self, generation: int, now: datetime) -> bool:
        """Only the current generation, before its expiry, holds the lease (I5)."""
        return (
            self.status is AttemptStatus.EXECUTING
            and generation == self.lease_generation
            and not self.lease_expired(now)
        )

    @property
    def no_effect_is_settled(self) -> bool:
        """True once the attempt was settled as "no effect" (failed_safe, or resolved so)."""
        if self.status is AttemptStatus.FAILED_SAFE:
            return True
        return (
            self.status is AttemptStatus.MANUALLY_RESOLVED
            and (self.resolution or {}).get("outcome") == Resolution.NO_EFFECT.value
        )

    def lookup_trusted_after(self) -> datetime | None:
        """From when a read-only lookup's "not applied" is proof of no effect.

        Until the dispatching call's deadline plus the build's settle window has
        passed, that call may still be in flight and land its effect after the
        lookup. None: no window was recorded (trusted at once, the old rule).
        """
        return parse_utc(self.settles_at) if self.settles_at is not None else None

    def not_applied_is_proof(self, now: datetime) -> bool:
        """Whether "not applied" from a lookup at ``now`` proves that no effect exists."""
        trusted_after = self.lookup_trusted_after()
        return trusted_after is None or now >= trusted_after

    def watch_due_at(self) -> datetime | None:
        """When the watch of a "no effect" settlement looks next; None when nothing
        is watched or its plan is done (I12)."""
        if not self.watch or self.watch_from is None or not self.no_effect_is_settled:
            return None
        if self.watch_looks >= len(self.watch):
            return None
        return parse_utc(self.watch_from) + timedelta(seconds=self.watch[self.watch_looks])

    def next_action_at(self) -> datetime | None:
        """When recovery should next look at this attempt; None once it never should."""
        if self.status is AttemptStatus.QUEUED:
            return parse_utc(self.not_before)
        if self.status is AttemptStatus.EXECUTING and self.lease_expires_at is not None:
            expiry = parse_utc(self.lease_expires_at)
            trusted_after = self.lookup_trusted_after()
            if (
                self.delivery_mode is DeliveryMode.CORRELATION_LOOKUP
                and self.dispatched
                and trusted_after is not None
                and trusted_after > expiry
            ):
                # Looking up before the settle window ends cannot prove "not applied".
                return trusted_after
            return expiry
        return self.watch_due_at()

    def watch_plan(self, plan: Sequence[int]) -> list[int] | None:
        """The plan a "no effect" settlement of this attempt carries: only a lookup can
        look again, so only ``correlation_lookup`` attempts are watched."""
        if self.delivery_mode is not DeliveryMode.CORRELATION_LOOKUP or not plan:
            return None
        return [int(seconds) for seconds in plan]

    # -- lease ---------------------------------------------------------------

    def check_leasable(self, now: datetime) -> None:
        if self.status is AttemptStatus.QUEUED:
            if now < parse_utc(self.not_before):
                raise IllegalTransition("The attempt is backing off.")
            return
        if (
            self.status is AttemptStatus.EXECUTING
            and self.lease_expired(now)
            and self.dispatched
            and self.delivery_mode is DeliveryMode.PROVIDER_IDEMPOTENCY
        ):
            return
        raise IllegalTransition("The attempt cannot be leased now.")

    def lease(self, *, owner: str, now: datetime, lease_seconds: int) -> int:
        """Take the next lease generation; returns it."""
        self.check_leasable(now)
        self._leased(
            owner=owner,
            generation=self.lease_generation + 1,
            expires_at=format_utc(now + timedelta(seconds=lease_seconds)),
            executor_build=self.executor_build,
            at=format_utc(now),
        )
        return self.lease_generation

    @event("Leased")
    def _leased(
        self, owner: str, generation: int, expires_at: str, executor_build: str, at: str
    ) -> None:
        self.status = AttemptStatus.EXECUTING
        self.lease_generation = generation
        self.lease_owner = owner
        self.lease_expires_at = expires_at
        if not self.dispatched:
            self.predispatch_leases += 1
        entry = {"generation": generation, "owner": owner, "at": at, "expires_at": expires_at}
        self.lease_history = [*self.lease_history, entry][-MAX_LEASE_HISTORY:]
        self.updated_at = at

    def requeue(
        self, *, generation: int | None, reason: str, not_before: datetime, now: datetime
    ) -> None:
        """Back to queued: only while nothing was dispatched.

        ``generation`` is the caller's lease (a worker giving up before dispatch);
        ``None`` is recovery returning an expired, undispatched lease.
        """
        if self.status is not AttemptStatus.EXECUTING or self.dispatched:
            raise IllegalTransition("Only an undispatched executing attempt can be requeued.")
        if generation is None:
            if not self.lease_expired(now):
                raise IllegalTransition("The lease has not expired.")
        elif not self.holds_lease(generation, now):
            raise IllegalTransition("The lease is not held.")
        self._requeued(
            generation=self.lease_generation,
            reason=reason,
            not_before=format_utc(not_before),
            at=format_utc(now),
        )

    @event("Requeued")
    def _requeued(self, generation: int, reason: str, not_before: str, at: str) -> None:
        self.status = AttemptStatus.QUEUED
        self.not_before = not_before
        self.lease_owner = None
        self.lease_expires_at = None
        self.updated_at = at

    # -- dispatch and result -----------------------------------------------------

    def mark_dispatch(
        self,
        *,
        generation: int,
        now: datetime,
        deadline: datetime | None = None,
        settle_seconds: float = 0.0,
    ) -> None:
        """The durable boundary: after this, an effect may exist.

        ``deadline`` is the one the call receives; ``settle_seconds`` is the
        executor build's window after it in which a call may still land.
        """
        if not self.holds_lease(generation, now):
            raise IllegalTransition("The lease is not held.")
        if self.dispatched_generation == generation:
            raise IllegalTransition("Dispatch already marked for this generation.")
        if deadline is None:
            self._dispatch_started(generation=generation, at=format_utc(now))
            return
        settles = deadline + timedelta(seconds=max(0.0, settle_seconds))
        self._dispatch_started(
            generation=generation,
            at=format_utc(now),
            deadline=format_utc(deadline),
            settles_at=format_utc(settles),
        )

    # The two optional fields arrived later: events stored without them replay
    # with the defaults, and their hashes (over the stored fields) are unchanged.
    @event("DispatchStarted")
    def _dispatch_started(
        self, generation: int, at: str, deadline: str | None = None, settles_at: str | None = None
    ) -> None:
        self.dispatch_started_at = at
        self.dispatch_deadline = deadline
        self.settles_at = settles_at
        self.dispatched_generation = generation
        self.dispatch_count += 1
        self.updated_at = at

    def record_result(
        self,
        *,
        generation: int,
        status: AttemptStatus,
        now: datetime,
        reason_code: str | None = None,
        receipt: dict[str, Any] | None = None,
    ) -> None:
        """Record the worker's result; only the current unexpired lease wins (I5)."""
        if status not in RESULT_STATUSES:
            raise IllegalTransition("Not a result status.")
        if not self.holds_lease(generation, now):
            raise IllegalTransition("The lease is not held.")
        # failed_safe without this generation's marker means "nothing was sent",
        # which only holds while no generation ever dispatched.
        without_marker_ok = status is AttemptStatus.FAILED_SAFE and not self.dispatched
        if self.dispatched_generation != generation and not without_marker_ok:
            raise IllegalTransition("A result needs this generation's dispatch marker.")
        if status is AttemptStatus.FAILED_SAFE and not self.no_write_is_proof:
            raise IllegalTransition("A re-send's refusal is no proof of no effect.")
        self._record(
            now,
            status.value,
            source="executor",
            generation=generation,
            reason_code=reason_code,
            receipt=receipt,
        )

    def fail_safe(self, *, reason_code: str, now: datetime, generation: int | None = None) -> None:
        """Provably no effect: a pre-dispatch recheck failed or leases ran out."""
        if self.is_terminal or self.status is AttemptStatus.OUTCOME_UNKNOWN:
            raise IllegalTransition("The attempt already has an outcome.")
        if self.dispatched:
            raise IllegalTransition("An effect may exist; failed_safe needs proof.")
        if generation is not None and not self.holds_lease(generation, now):
            raise IllegalTransition("The lease is not held.")
        self._record(
            now,
            AttemptStatus.FAILED_SAFE.value,
            source="worker",
            generation=generation,
            reason_code=reason_code,
            receipt=None,
        )

    def record_unknown(
        self, *, reason_code: str, now: datetime, generation: int | None = None
    ) -> None:
        """An effect may exist and nothing can settle it automatically.

        ``generation=None`` is recovery acting on an expired lease; otherwise the
        caller must hold the lease (a retry whose pre-dispatch recheck failed).
        """
        if self.status is not AttemptStatus.EXECUTING or not self.dispatched:
            raise IllegalTransition("Only a dispatched executing attempt can become unknown.")
        if generation is None:
            if not self.lease_expired(now):
                raise IllegalTransition("The lease has not expired.")
        elif not self.holds_lease(generation, now):
            raise IllegalTransition("The lease is not held.")
        source = "worker" if generation is not None else "recovery"
        self._record(
            now,
            AttemptStatus.OUTCOME_UNKNOWN.value,
            source=source,
            generation=generation,
            reason_code=reason_code,
            receipt=None,
        )

    def record_reconciled(
        self,
        *,
        status: AttemptStatus,
        now: datetime,
        reason_code: str | None = None,
        receipt: dict[str, Any] | None = None,
        watch: Sequence[int] = (),
    ) -> None:
        """An authoritative read-only lookup answered.

        Allowed from ``outcome_unknown`` (to succeeded / failed_safe) and from an
        expired, dispatched executing attempt (to any result status). A
        ``failed_safe`` ("not applied") carries the watch plan (``watch``): later
        lookups look again (I12).
        """
        if self.status is AttemptStatus.OUTCOME_UNKNOWN:
            if status not in (AttemptStatus.SUCCEEDED, AttemptStatus.FAILED_SAFE):
                raise IllegalTransition("Reconciliation did not settle the outcome.")
        elif self.status is AttemptStatus.EXECUTING and self.dispatched and self.lease_expired(now):
            if status not in RESULT_STATUSES:
                raise IllegalTransition("Not a result status.")
        else:
            raise IllegalTransition("Nothing to reconcile in the current state.")
        self._record(
            now,
            status.value,
            source="reconciler",
            generation=None,
            reason_code=reason_code,
            receipt=receipt,
            watch=self.watch_plan(watch) if status is AttemptStatus.FAILED_SAFE else None,
        )

    def _record(
        self,
        now: datetime,
        status: str,
        *,
        source: str,
        generation: int | None,
        reason_code: str | None,
        receipt: dict[str, Any] | None,
        watch: list[int] | None = None,
    ) -> None:
        self._result_recorded(
            generation=generation,
            status=status,
            reason_code=reason_code,
            receipt=receipt,
            source=source,
            at=format_utc(now),
            watch=watch or None,
        )

    # ``watch`` arrived later: an event stored without it replays with None (no
    # watch) and keeps its hash (data() is what was stored).
    @event("ResultRecorded")
    def _result_recorded(
        self,
        generation: int | None,
        status: str,
        reason_code: str | None,
        receipt: dict[str, Any] | None,
        source: str,
        at: str,
        watch: list[int] | None = None,
    ) -> None:
        self.status = AttemptStatus(status)
        result: dict[str, Any] = {"kind": status, "source": source}
        if reason_code is not None:
            result["reason_code"] = reason_code
        if receipt is not None:
            result["receipt"] = receipt
        self.result = result
        self.lease_owner = None
        self.lease_expires_at = None
        self.updated_at = at
        self._start_watch(watch, at)

    def _start_watch(self, watch: list[int] | None, at: str) -> None:
        self.watch = list(watch) if watch else None
        self.watch_from = at if watch else None
        self.watch_looks = 0

    def observe_late_result(self, *, generation: int, kind: str, now: datetime) -> None:
        """A stale generation reported back: keep it, never let it win (I8).

        A success after the attempt was settled as "no effect" contradicts that
        settlement: the attempt moves to ``effect_after_no_effect`` for an admin.
        """
        if self.holds_lease(generation, now):
            raise IllegalTransition("The current lease must record a result, not observe.")
        if kind == AttemptStatus.SUCCEEDED.value and self.no_effect_is_settled:
            self._effect_after_no_effect(
                generation=generation,
                previous=self.status.value,
                source="worker",
                at=format_utc(now),
            )
            return
        self._late_result_observed(generation=generation, kind=kind, at=format_utc(now))

    @event("EffectAfterNoEffect")
    def _effect_after_no_effect(
        self, generation: int | None, previous: str, source: str, at: str
    ) -> None:
        self.status = AttemptStatus.EFFECT_AFTER_NO_EFFECT
        self.observations += 1
        self.updated_at = at

    @event("LateResultObserved")
    def _late_result_observed(self, generation: int, kind: str, at: str) -> None:
        self.observations += 1

    def look_again(self, *, verdict: str, now: datetime) -> None:
        """The watch's read-only lookup answered (I12): ``applied`` moves the attempt to
        ``effect_after_no_effect``; anything else is one look of the plan taken.

        Only when a look is due: the attempt is terminal, so no lease can race it
        (I5), and a look never changes a settlement it does not contradict (I8).
        """
        due = self.watch_due_at()
        if due is None or now < due:
            raise IllegalTransition("No look of the watch is due.")
        if verdict == "applied":
            self._effect_after_no_effect(
                generation=None,
                previous=self.status.value,
                source=WATCH_SOURCE,
                at=format_utc(now),
            )
            return
        self._looked_again(step=self.watch_looks + 1, verdict=verdict, at=format_utc(now))

    @event("LookedAgain")
    def _looked_again(self, step: int, verdict: str, at: str) -> None:
        self.watch_looks = step

    # -- restore (I17) -------------------------------------------------------------

    def mark_possibly_dispatched(
        self, *, restore_id: str, now: datetime, settle_seconds: float
    ) -> bool:
        """A restore found this attempt unsettled: from now on it counts as dispatched,
        under a lease that has expired (a live one's expiry is kept), and a lookup's
        "not applied" is proof only ``settle_seconds`` after the restore. False (and
        nothing appended) when it is settled or this restore marked it already."""
        if self.status not in (AttemptStatus.QUEUED, AttemptStatus.EXECUTING):
            return False
        if restore_id in self.restores:
            return False
        expires = now
        if self.status is AttemptStatus.EXECUTING and self.lease_expires_at is not None:
            expires = max(expires, parse_utc(self.lease_expires_at))
        settles = now + timedelta(seconds=max(0.0, settle_seconds))
        if self.settles_at is not None:
            settles = max(settles, parse_utc(self.settles_at))
        self._possibly_dispatched(
            restore_id=restore_id,
            lease_expires_at=format_utc(expires),
            settles_at=format_utc(settles),
            at=format_utc(now),
        )
        return True

    @event("PossiblyDispatched")
    def _possibly_dispatched(
        self, restore_id: str, lease_expires_at: str, settles_at: str, at: str
    ) -> None:
        self.restores = [*self.restores, restore_id]
        self.status = AttemptStatus.EXECUTING
        self.lease_owner = None if lease_expires_at == at else self.lease_owner
        self.lease_expires_at = lease_expires_at
        self.settles_at = settles_at
        self.dispatch_count += 1  # a dispatch after the backup may be lost with it
        self.updated_at = at

    # -- admin -----------------------------------------------------------------

    def check_revision(self, expected_revision: int) -> None:
        if expected_revision != self.version:
            raise StaleRevision()

    def resolve(
        self,
        *,
        outcome: Resolution,
        reason: str,
        resolved_by: str,
        now: datetime,
        receipt: dict[str, Any] | None = None,
        watch: Sequence[int] = (),
    ) -> None:
        """Admin resolution of an uncertain outcome (or of an effect seen after "no
        effect"); never calls the executor (I6).

        ``no_effect`` from ``outcome_unknown`` carries the watch plan (``watch``,
        lookup builds only): the lookup looks again (I12). Not after
        ``effect_after_no_effect``: the admin has seen the effect and decided.
        """
        if self.status not in RESOLVABLE:
            raise NotOutcomeUnknown()
        plan = None
        if outcome is Resolution.NO_EFFECT and self.status is AttemptStatus.OUTCOME_UNKNOWN:
            plan = self.watch_plan(watch)
        self._manually_resolved(
            outcome=outcome.value,
            reason=reason,
            resolved_by=resolved_by,
            receipt=receipt,
            at=format_utc(now),
            watch=plan,
        )

    def acknowledge(self, *, acknowledged_by: str, note: str, now: datetime) -> None:
        """An admin saw a ``failed_safe`` attempt (provably no effect) and needs
        nothing more of it: recorded, and it leaves the attention list. The
        status stays ``failed_safe``; the watch of a "no effect" (I12) goes on."""
        if self.status is not AttemptStatus.FAILED_SAFE:
            raise IllegalTransition("Only a failed_safe attempt can be acknowledged.")
        self._acknowledged(acknowledged_by=acknowledged_by, note=note, at=format_utc(now))

    @event("Acknowledged")
    def _acknowledged(self, acknowledged_by: str, note: str, at: str) -> None:
        self.acknowledgement = {"acknowledged_by": acknowledged_by, "note": note, "at": at}
        self.updated_at = at

    # ``watch`` arrived later, as on ResultRecorded.
    @event("ManuallyResolved")
    def _manually_resolved(
        self,
        outcome: str,
        reason: str,
        resolved_by: str,
        receipt: dict[str, Any] | None,
        at: str,
        watch: list[int] | None = None,
    ) -> None:
        self.status = AttemptStatus.MANUALLY_RESOLVED
        self.resolution = {
            "outcome": outcome,
            "reason": reason,
            "resolved_by": resolved_by,
            "resolved_at": at,
        }
        if receipt is not None:
            self.resolution["receipt"] = receipt
        self.updated_at = at
        self._start_watch(watch, at)
