"""One attempt stream checked from its raw events against a small independent model
of the state machine (I5, I8): the checks the chaos oracle and the hardening tests share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from domain.base import LedgerAggregate, LedgerEvent
from domain.directory import DeliveryMode
from domain.redaction import validate_receipt
from domain.services.execution import WorkerPolicy
from domain.spec import derive_attempt_id, derive_idempotency_key, parse_utc
from projections.audit import event_type

TERMINAL = ("succeeded", "failed_safe", "manually_resolved", "effect_after_no_effect")
# Why a worker may fail an attempt before dispatch: the directory (the policy set
# and standing grants included), the stored spec and its hashes, or the
# pre-dispatch budget (I7, I11, I14, I15). Never where it ran.
WORKER_REFUSALS = frozenset(
    {
        "spec_expired",
        "permission_not_in_catalogue",
        "directory_record_missing",
        "actor_disabled",
        "identity_binding",
        "channel_binding",
        "permission_not_granted",
        "executor_build_unavailable",
        "delivery_mode_mismatch",
        "target_drift",
        "executor_build_mismatch",
        "stored_spec_invalid",
        "hash_mismatch",
        "proposal_not_claimed",
        "predispatch_lease_limit",
        # the policy set and standing grants (I15, I14)
        "policy_denied",
        "policy_approval_withdrawn",
        "policy_set_invalid",
        "standing_grant_missing",
        "standing_grant_revoked",
        # a quorum's counted voters, each checked again (I13)
        "voter_disabled",
        "voter_not_member",
        "requester_not_counted",
    }
)
WATCH_VERDICTS = frozenset(
    {
        "not_applied",
        "unknown",
        "lookup_failed",
        "proposal_missing",
        "reconciler_unavailable",
        "stored_spec_invalid",
    }
)
REASON_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class Violation(AssertionError):
    """An invariant does not hold; the message names it and the stream."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Violation(message)


def state_of(aggregate: LedgerAggregate) -> dict[str, Any]:
    """Everything an aggregate holds except its not-yet-collected events (the chain
    head as its hash text)."""
    state = {
        k: v for k, v in vars(aggregate).items() if k not in ("_pending_events", "_chain_head")
    }
    state["chain_head"] = aggregate.chain_head
    return state


@dataclass
class AttemptSummary:
    """What the independent model says about one attempt stream."""

    status: str
    mode: DeliveryMode
    idempotency_key: str
    generation: int = 0
    lease_expires_at: datetime | None = None
    not_before: datetime | None = None
    dispatched_generations: list[int] = field(default_factory=list)
    lease_expiries: dict[int, datetime] = field(default_factory=dict)
    result_source: str | None = None
    settles_at: datetime | None = None  # the dispatching call may land until then
    resolution: str | None = None
    watch: list[int] = field(default_factory=list)  # the looks of a "no effect" (I12)
    watch_from: datetime | None = None
    watch_looks: int = 0
    settled_at: datetime | None = None  # when the newest result or resolution was recorded
    flagged: bool = False  # an effect was flagged after a "no effect" (EffectAfterNoEffect)

    def next_action_at(self) -> datetime | None:
        if self.status == "queued":
            return self.not_before
        if self.status == "executing":
            return self.lease_expires_at
        return self.watch_due_at()

    def watch_due_at(self) -> datetime | None:
        """When the watch of a "no effect" settlement looks next (None: not watched, or done)."""
        if not self.settled_no_effect or self.watch_from is None:
            return None
        if self.watch_looks >= len(self.watch):
            return None
        return self.watch_from + timedelta(seconds=self.watch[self.watch_looks])

    def due_may_wait_until(self) -> datetime | None:
        """A lookup-mode attempt whose call may land after its lease may be due as
        late as the end of the settle window (looking earlier proves nothing)."""
        if (
            self.status == "executing"
            and self.mode is DeliveryMode.CORRELATION_LOOKUP
            and self.dispatched_generations
            and self.settles_at is not None
            and self.lease_expires_at is not None
            and self.settles_at > self.lease_expires_at
        ):
            return self.settles_at
        return None

    @property
    def settled_no_effect(self) -> bool:
        return self.status == "failed_safe" or (
            self.status == "manually_resolved" and self.resolution == "no_effect"
        )


def _at(data: dict[str, Any]) -> datetime:
    return parse_utc(str(data["at"]))


def check_attempt_stream(
    stream_id: str, events: Sequence[LedgerEvent], policy: WorkerPolicy
) -> AttemptSummary:
    """Replay an attempt stream through the oracle's own state machine (I5, I8)."""
    expect(bool(events), f"{stream_id}: empty attempt stream")
    first = events[0]
    expect(event_type(first) == "Queued", f"{stream_id}: v1 is {event_type(first)}")
    queued = first.data()
    proposal_id, version, payload = (
        queued["proposal_id"],
        queued["proposal_version"],
        queued["payload_hash"],
    )
    expect(
        derive_attempt_id(proposal_id, version, payload) == stream_id,
        f"{stream_id}: attempt id is not derived from its proposal version (I1)",
    )
    expect(
        derive_idempotency_key(proposal_id, version, payload) == queued["idempotency_key"],
        f"{stream_id}: idempotency key is not derived from its proposal version (I1)",
    )
    s = AttemptSummary(
        "queued",
        DeliveryMode(queued["delivery_mode"]),
        queued["idempotency_key"],
        not_before=_at(queued),
    )
    predispatch_leases = 0
    where = stream_id
    for event in events[1:]:
        kind, d = event_type(event), event.data()
        where = f"{stream_id} v{event.originator_version} {kind}"
        at = _at(d)
        expect(kind != "Queued", f"{where}: a second Queued (I1)")
        if kind == "EffectAfterNoEffect":
            expect(
                s.settled_no_effect and d["previous"] == s.status,
                f"{where}: a late effect flagged on {s.status}",
            )
            if d.get("source") == "watch":
                due = s.watch_due_at()
                expect(due is not None and at >= due, f"{where}: the watch looked before its time")
            s.status, s.flagged = "effect_after_no_effect", True
            continue
        if kind == "ManuallyResolved" and s.status == "effect_after_no_effect":
            expect(not d.get("watch"), f"{where}: a resolution of a seen effect is watched")
            s.status, s.result_source, s.resolution = "manually_resolved", "admin", d["outcome"]
            s.watch, s.watch_from, s.watch_looks, s.settled_at = [], None, 0, at
            continue
        if kind == "LookedAgain":
            due = s.watch_due_at()
            expect(
                due is not None and at >= due and d["step"] == s.watch_looks + 1,
                f"{where}: a look of the watch that was not due (I12)",
            )
            expect(d["verdict"] in WATCH_VERDICTS, f"{where}: look verdict {d['verdict']}")
            s.watch_looks = d["step"]
            continue
        if s.status in TERMINAL:
            expect(kind == "LateResultObserved", f"{where}: after terminal {s.status} (I8)")
            expect(
                not (d.get("kind") == "succeeded" and s.settled_no_effect),
                f"{where}: a success after {s.status} was only observed, not flagged",
            )
            continue
        if kind == "Leased":
            expect(d["generation"] == s.generation + 1, f"{where}: generation skips")
            if s.status == "queued":
                expect(
                    s.not_before is not None and at >= s.not_before,
                    f"{where}: leased while backing off",
                )
            else:
                expect(
                    s.status == "executing"
                    and bool(s.dispatched_generations)
                    and s.lease_expires_at is not None
                    and at >= s.lease_expires_at
                    and s.mode is DeliveryMode.PROVIDER_IDEMPOTENCY,
                    f"{where}: re-leased outside provider-idempotent recovery",
                )
            s.generation = d["generation"]
            s.lease_expires_at = parse_utc(d["expires_at"])
            s.lease_expiries[s.generation] = s.lease_expires_at
            s.status = "executing"
            if not s.dispatched_generations:
                predispatch_leases += 1
                expect(
                    predispatch_leases <= policy.max_predispatch_leases,
                    f"{where}: more pre-dispatch leases than the policy allows",
                )
        elif kind == "DispatchStarted":
            expect(
                s.status == "executing"
                and d["generation"] == s.generation
                and s.lease_expires_at is not None
                and at < s.lease_expires_at,
                f"{where}: dispatch marked without the current unexpired lease (I5)",
            )
            expect(d["generation"] not in s.dispatched_generations, f"{where}: marked twice")
            s.dispatched_generations.append(d["generation"])
            if d.get("settles_at") is not None:
                s.settles_at = parse_utc(d["settles_at"])
                expect(
                    d.get("deadline") is not None
                    and parse_utc(d["deadline"]) <= s.settles_at
                    and parse_utc(d["deadline"]) < s.lease_expires_at,
                    f"{where}: the call's deadline is not inside its lease",
                )
            if s.mode is not DeliveryMode.PROVIDER_IDEMPOTENCY:
                expect(
                    len(s.dispatched_generations) == 1,
                    f"{where}: second dispatch in {s.mode.value} (blind duplicate)",
                )
            expect(
                len(s.dispatched_generations) <= policy.max_dispatches,
                f"{where}: more dispatches than the policy allows",
            )
        elif kind == "PossiblyDispatched":
            # A restore found it unsettled (I17): from now on it counts as dispatched
            # (generation 0: a dispatch the restored store does not show).
            expect(s.status in ("queued", "executing"), f"{where}: a restore marked {s.status}")
            s.status = "executing"
            s.dispatched_generations.append(0)
            s.lease_expires_at = parse_utc(d["lease_expires_at"])
            s.settles_at = parse_utc(d["settles_at"])
        elif kind == "Requeued":
            expect(
                s.status == "executing"
                and not s.dispatched_generations
                and d["generation"] == s.generation,
                f"{where}: requeued a dispatched or foreign lease",
            )
            s.status, s.not_before, s.lease_expires_at = "queued", parse_utc(d["not_before"]), None
        elif kind == "ResultRecorded":
            _check_result(where, s, d, at)
            s.status, s.lease_expires_at, s.result_source = d["status"], None, d["source"]
            _start_watch(where, s, d, at)
        elif kind == "ManuallyResolved":
            expect(s.status == "outcome_unknown", f"{where}: resolved from {s.status}")
            s.status, s.result_source, s.resolution = "manually_resolved", "admin", d["outcome"]
            _start_watch(where, s, d, at)
        elif kind == "LateResultObserved":
            held = (
                s.status == "executing"
                and d["generation"] == s.generation
                and s.lease_expires_at is not None
                and at < s.lease_expires_at
            )
            expect(not held, f"{where}: the lease holder's result was only observed")
        else:
            raise Violation(f"{where}: unknown event type")
    return s


def _check_result(where: str, s: AttemptSummary, d: dict[str, Any], at: datetime) -> None:
    new, source, generation = d["status"], d["source"], d["generation"]
    expect(new in ("succeeded", "failed_safe", "outcome_unknown"), f"{where}: status {new}")
    if d.get("reason_code") is not None:
        expect(bool(REASON_CODE.match(d["reason_code"])), f"{where}: unbounded reason code")
    if d.get("receipt") is not None:
        expect(validate_receipt(d["receipt"]) == d["receipt"], f"{where}: unsafe receipt stored")
    holds = (
        s.status == "executing"
        and generation == s.generation
        and s.lease_expires_at is not None
        and at < s.lease_expires_at
    )
    dispatched = bool(s.dispatched_generations)
    if source == "executor":
        expect(holds, f"{where}: executor result without the current unexpired lease (I5)")
        expect(
            generation in s.dispatched_generations or (new == "failed_safe" and not dispatched),
            f"{where}: result without this generation's dispatch marker",
        )
        if new == "failed_safe" and dispatched:
            check_no_write_proof(where, s, generation)
    elif source == "worker":
        if generation is None:
            expect(s.status == "queued", f"{where}: lease-less worker result from {s.status}")
        else:
            expect(holds, f"{where}: worker result without the current unexpired lease (I5)")
        if new == "failed_safe":
            expect(not dispatched, f"{where}: failed_safe after a dispatch (needs proof)")
            reason = d.get("reason_code")
            expect(
                reason in WORKER_REFUSALS,
                f"{where}: failed_safe for {reason}, which no directory record, spec or "
                "budget explains: failed because of which worker saw it (I11)",
            )
        else:
            expect(new == "outcome_unknown" and dispatched, f"{where}: worker {new}")
    elif source == "recovery":
        expect(
            s.status == "executing"
            and dispatched
            and new == "outcome_unknown"
            and s.lease_expires_at is not None
            and at >= s.lease_expires_at,
            f"{where}: recovery result on a live or undispatched lease",
        )
    elif source == "reconciler":
        if s.status == "outcome_unknown":
            expect(new in ("succeeded", "failed_safe"), f"{where}: reconciled to {new}")
        else:
            expect(
                s.status == "executing"
                and dispatched
                and s.lease_expires_at is not None
                and at >= s.lease_expires_at,
                f"{where}: reconciled a live or undispatched lease",
            )
    else:
        raise Violation(f"{where}: unknown result source {source}")


def check_no_write_proof(where: str, s: AttemptSummary, generation: int) -> None:
    """An executor's "nothing was written" proves no effect only on the attempt's first
    dispatch: a re-send's refusal says nothing of the dispatch whose answer was lost."""
    expect(
        s.dispatched_generations == [generation],
        f"{where}: failed_safe from a re-send's refusal (dispatch "
        f"{len(s.dispatched_generations)}): an earlier dispatch may have landed",
    )


def _start_watch(where: str, s: AttemptSummary, d: dict[str, Any], at: datetime) -> None:
    """A settling event carries a watch only where a lookup can look again: a
    lookup's "not applied", or an admin's no_effect, of a correlation_lookup attempt."""
    watch = d.get("watch") or []
    lookup_no_effect = s.mode is DeliveryMode.CORRELATION_LOOKUP and (
        (s.status == "failed_safe" and d.get("source") == "reconciler")
        or (s.status == "manually_resolved" and s.resolution == "no_effect")
    )
    expect(not watch or lookup_no_effect, f"{where}: a watch where no lookup can look again")
    if lookup_no_effect:
        check_watched(where, watch)
    s.settled_at = at
    s.watch = [int(v) for v in watch]
    s.watch_from = at if watch else None
    s.watch_looks = 0


def check_watched(where: str, watch: Sequence[int]) -> None:
    """I12: a lookup's "not applied" (or an admin's no_effect of a lookup build) is
    watched by a bounded, increasing plan of later looks."""
    expect(bool(watch), f"{where}: a lookup's 'not applied' is not watched (I12)")
    expect(
        all(b > a for a, b in pairwise(watch)) and len(watch) <= 10,
        f"{where}: the watch plan is not bounded and increasing",
    )
