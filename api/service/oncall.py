"""For on-call admins: what an attempt was, what to do about it, and the actions
that settle what needs a human (acknowledge a failed_safe, reveal a preview).

``describe`` reads the attempt's and its proposal's streams (one attempt at a
time, for its page): capability, destination, target and base revision, the
actor, who asked (the proposer), who approved and through which channel, how
the version was decided (kind, votes with their times, ``required``, an
escalation's group: ``api.service.ballots``), each
step's time, the delivery mode, the receipt, whether a reconciler exists, and,
because only admins reach it, the idempotency key (what the operator searches
the provider for). A queued attempt past ``LEDGER_WAITING_FOR_BUILD_SECONDS``
(the derived ``waiting_for_build`` entry) is told apart from one that just
arrived: its guidance names the build no worker took, says whether this
process hosts it, and what to do. The content stays out (I10): the approved preview is shown
only by ``reveal``, which records the reveal first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from adapters.bootstrap import Ledger
from api.service import ballots
from api.service.attempts import refreshed
from api.service.principal import Principal, Role, known_id, require_role
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.errors import NotFound
from domain.oversight import PreviewReveals, reveals_id
from domain.proposal import Proposal
from domain.redaction import redact
from domain.services import oversight, resolution
from domain.services.authorization import DirectoryReads
from projections.attention import is_waiting_for_build
from projections.labels import EVENT_WORDS

MAX_ID_CHARS = 80


def _attempt(ledger: Ledger, attempt_id: str) -> ExecutionAttempt:
    if len(attempt_id) > MAX_ID_CHARS:
        raise NotFound()
    attempt = ledger.store.get(ExecutionAttempt, known_id(attempt_id))
    if attempt is None:
        raise NotFound()
    return attempt


def _approvals(
    ledger: Ledger, attempt: ExecutionAttempt
) -> tuple[str | None, list[dict[str, Any]]]:
    """The proposer, and who approved the version (the claim that made the attempt)."""
    proposal = ledger.store.get(Proposal, attempt.proposal_id)
    if proposal is None:
        return None, []
    events, _ = ledger.store.audit_events(attempt.proposal_id)
    approvers = []
    for event in events:
        data = event.data()
        if type(event).__name__ != "Claimed" or data.get("attempt_id") != attempt.id:
            continue
        shown = proposal.presentations.get(str(data.get("presentation_id")), {})
        approvers.append(
            {
                "actor_id": shown.get("actor_id"),
                "identity_binding_id": shown.get("identity_binding_id"),
                "channel_binding_id": shown.get("channel_binding_id"),
                "asserted_by": data.get("asserted_by"),
                "at": data.get("at"),
            }
        )
    return proposal.proposer, approvers


def _steps(ledger: Ledger, attempt_id: str) -> list[dict[str, Any]]:
    events, _ = ledger.store.audit_events(attempt_id)
    steps = []
    for event in events:
        name = type(event).__name__
        steps.append({"step": EVENT_WORDS.get(name, name), "at": event.data().get("at")})
    return steps


@dataclass(frozen=True)
class Waiting:
    """A queued attempt on the ``waiting_for_build`` entry: the build no worker
    took it with, and whether this process's registry has that build."""

    capability: str
    build: str
    threshold_seconds: int
    hosted_here: bool
    dispatched: bool


def guidance(
    status: str,
    delivery_mode: str,
    key: str,
    has_reconciler: bool,
    acknowledged: bool,
    waiting: Waiting | None = None,
) -> str:
    """What the on-call admin should do next, in plain words."""
    if status == AttemptStatus.OUTCOME_UNKNOWN.value:
        if has_reconciler:
            return (
                "The call may have had its effect. Reconcile asks the build's read-only "
                f"lookup again; if it cannot tell, search the provider for key {key} and "
                "record what you found."
            )
        return (
            "Operator-only build (no reconciler): search the provider for key "
            f"{key}; then record what you found: effect_applied if it is there, "
            "no_effect if it is not."
        )
    if status == AttemptStatus.EFFECT_AFTER_NO_EFFECT.value:
        return (
            "The effect was found after the attempt was settled as having none. Search "
            f"the provider for key {key}, undo or keep the effect there, then record "
            "what you decided."
        )
    if status == AttemptStatus.FAILED_SAFE.value:
        if acknowledged:
            return "Acknowledged: provably no effect, nothing more to do."
        return (
            "Provably no effect. Tell whoever asked if they need to know, then "
            "acknowledge it so it leaves the list."
        )
    if waiting is not None:
        return _waiting_guidance(waiting)
    if status == AttemptStatus.QUEUED.value:
        return (
            "Queued: the next worker hosting its build takes it. If it waits long, no "
            "running worker hosts that build: start one (see GET /executors), or withdraw "
            "the build in the directory so that a worker settles it. Its proposal's expiry "
            "alone settles nothing: a worker refuses an expired attempt only when it takes it."
        )
    return "Nothing to do: the attempt is in progress or settled."


def _waiting_guidance(waiting: Waiting) -> str:
    # Whether this process hosts the build tells the two causes apart: a build
    # no deployed worker has (an executors file changed without its check), or
    # a worker that has it but is off or busy.
    if waiting.hosted_here:
        here = (
            "This server hosts that build, so its own worker is off (--no-worker or "
            "LEDGER_EXECUTION_ENABLED=false) or busy, and so is every other worker with it."
        )
    else:
        here = "This server does not host that build, and no worker that does has taken it."
    settled = (
        "outcome_unknown, since an earlier dispatch may have landed"
        if waiting.dispatched
        else "failed_safe, since it was never dispatched"
    )
    return (
        f"Waiting for its build: no worker hosting {waiting.capability} build "
        f"{waiting.build} has taken it for longer than LEDGER_WAITING_FOR_BUILD_SECONDS "
        f"({waiting.threshold_seconds} s). {here} Start a worker whose executors file "
        "lists this build (ledger executors, run with a worker's settings, prints the "
        "builds it hosts), or withdraw the build in the directory (PUT "
        f"/directory/executor-builds/{waiting.capability}/{waiting.build} with "
        '"available": false) and a '
        f"running worker settles it: {settled}."
    )


def describe(ledger: Ledger, principal: Principal, attempt_id: str) -> dict[str, Any]:
    """What the attempt was and what to do about it. Admins only."""
    require_role(principal, Role.ADMIN)
    attempt = _attempt(ledger, attempt_id)
    proposer, approvers = _approvals(ledger, attempt)
    spec = attempt.spec or {}
    has_reconciler = ledger.registry.reconciler(attempt.capability, attempt.executor_build)
    receipt = (attempt.result or {}).get("receipt")
    reveals = ledger.store.get(PreviewReveals, reveals_id(attempt.id))
    proposal = ledger.store.get(Proposal, attempt.proposal_id)
    decision = (
        None
        if proposal is None or attempt.proposal_version not in proposal.versions
        else ballots.decision_of(
            ledger,
            proposal,
            attempt.proposal_version,
            ledger.clock.now(),
            DirectoryReads(ledger.context, fresh=False),
        )
    )
    status = attempt.status.value
    hosted_here = ledger.registry.get(attempt.capability, attempt.executor_build) is not None
    threshold = ledger.settings.waiting_for_build_seconds
    waiting = (
        Waiting(
            attempt.capability,
            attempt.executor_build,
            threshold,
            hosted_here,
            attempt.dispatched,
        )
        if is_waiting_for_build(status, attempt.updated_at, ledger.clock.now(), threshold)
        else None
    )
    shown: dict[str, Any] = redact(
        {
            "capability": attempt.capability,
            "effect": spec.get("effect"),
            "destination": spec.get("destination"),
            "target_id": attempt.target_id,
            "target_revision": attempt.target_revision,
            "proposer": proposer,
            "approvers": approvers,
        }
    )
    return {
        **shown,
        "actor_id": attempt.actor_id,
        "permission": attempt.permission,
        "channel_binding_id": attempt.channel_binding_id,
        "identity_binding_id": attempt.identity_binding_id,
        "executor_build": attempt.executor_build,
        "delivery_mode": attempt.delivery_mode.value,
        "idempotency_key": attempt.idempotency_key,
        "receipt_json": None if receipt is None else json.dumps(receipt, indent=2, sort_keys=True),
        "steps": _steps(ledger, attempt.id),
        "has_reconciler": has_reconciler is not None,
        "acknowledgement": attempt.acknowledgement,
        "reveals": [] if reveals is None else reveals.reveals,
        "decision": decision,
        "hosted_here": hosted_here,
        "waiting_for_build": waiting is not None,
        "guidance": guidance(
            status,
            attempt.delivery_mode.value,
            attempt.idempotency_key,
            has_reconciler is not None,
            attempt.acknowledgement is not None,
            waiting,
        ),
    }


def acknowledge(
    ledger: Ledger, principal: Principal, attempt_id: str, expected_revision: int, note: str
) -> None:
    """Acknowledge a failed_safe attempt as the calling admin (it leaves the
    attention list); the views move before the answer."""
    require_role(principal, Role.ADMIN)
    resolution.acknowledge(
        ledger.context,
        attempt_id=known_id(attempt_id),
        expected_revision=expected_revision,
        note=note,
        by=principal.subject,
    )
    refreshed(ledger, attempt_id)


def reveal(ledger: Ledger, principal: Principal, attempt_id: str) -> tuple[str, bool]:
    """The approved preview, after recording who revealed it when. Admins only."""
    require_role(principal, Role.ADMIN)
    _attempt(ledger, attempt_id)
    return oversight.reveal_preview(ledger.context, attempt_id=attempt_id, by=principal.subject)
