"""The status view of an execution attempt: redacted, what status queries read.

Defined once, in two parts that everything else derives from:

- **what it shows**: ``AttemptStatusView`` lists the view's fields and their
  types (the HTTP response model ``AttemptOut`` is it); a stored row is that
  view plus what access checks and audits need (``status_row``);
- **how each event changes it**: the fold in ``projections.status_fold``,
  which the live projector and the rebuild both produce every row through.

Never spec content, tokens, idempotency keys or raw provider data (I10): only
ids, states, timestamps, the bounded reason code and the validated receipt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from domain.attempt import ExecutionAttempt
from projections.ports import ViewRecord


class AttemptResult(BaseModel):
    """The recorded outcome: its kind, a bounded reason code and a validated receipt."""

    kind: Annotated[
        str, Field(description="The status the result recorded (succeeded, failed_safe...).")
    ]
    reason_code: Annotated[
        str | None, Field(description="A bounded, redacted reason code, when one was given.")
    ] = None
    receipt: Annotated[
        dict[str, Any] | None,
        Field(description="The executor's validated receipt (allow-listed safe values)."),
    ] = None


class AttemptResolution(BaseModel):
    """An admin's resolution of an uncertain outcome."""

    outcome: Annotated[str, Field(description="effect_applied or no_effect.")]
    reason: Annotated[str, Field(description="The admin's bounded reason.")]
    resolved_by: Annotated[str, Field(description="The admin who resolved it.")]
    resolved_at: Annotated[str, Field(description="When (UTC, RFC 3339).")]


class AttemptApproval(BaseModel):
    """How the proposal version was approved (design.md 2.7): ids only."""

    kind: Annotated[str, Field(description="human, quorum, policy or grant.")]
    approvers: Annotated[
        list[str],
        Field(
            description="The actors who approved (human: one; quorum: every counted "
            "voter, in vote order; policy and grant: none)."
        ),
    ] = Field(default_factory=list)
    policy_id: Annotated[
        str | None,
        Field(
            description="policy: the @auto_approve permit that approved it; "
            "quorum: the policy that asked for one."
        ),
    ] = None
    policy_set_version: Annotated[
        int | None, Field(description="policy: the policy set's version at the claim.")
    ] = None
    policy_digest: Annotated[
        str | None, Field(description="policy: the policy set's digest at the claim.")
    ] = None
    grant_id: Annotated[
        str | None, Field(description="grant: the standing grant that approved it.")
    ] = None
    use: Annotated[int | None, Field(description="grant: which use of the grant this was.")] = None
    max_uses: Annotated[int | None, Field(description="grant: its maximum number of uses.")] = None
    group: Annotated[
        str | None, Field(description="quorum: the group the approvers were counted in.")
    ] = None
    required: Annotated[
        int | None, Field(description="quorum: how many distinct members had to approve.")
    ] = None


class AttemptAcknowledgement(BaseModel):
    """An admin's acknowledgement of a ``failed_safe`` attempt: seen, nothing more to do."""

    acknowledged_by: Annotated[str, Field(description="The admin who acknowledged it.")]
    note: Annotated[str, Field(description="The admin's bounded note.")]
    at: Annotated[str, Field(description="When (UTC, RFC 3339).")]


class AttemptStatusView(BaseModel):
    """The redacted status view of an attempt."""

    model_config = ConfigDict(extra="forbid")

    attempt_id: Annotated[str, Field(description="The attempt's deterministic id (att_...).")]
    proposal_id: Annotated[str, Field(description="The proposal it executes.")]
    proposal_version: Annotated[int, Field(description="The approved proposal version.")]
    status: Annotated[
        str,
        Field(
            description="queued, executing, succeeded, failed_safe, outcome_unknown, "
            "manually_resolved or effect_after_no_effect."
        ),
    ]
    revision: Annotated[
        int,
        Field(description="The attempt stream's version: what reconcile and resolve expect."),
    ]
    delivery_mode: Annotated[str, Field(description="The executor build's delivery mode.")]
    created_at: Annotated[str, Field(description="When it was queued (UTC, RFC 3339).")]
    updated_at: Annotated[
        str, Field(description="When the newest event that changed this view happened.")
    ]
    lease_generation: Annotated[
        int, Field(description="The latest worker lease generation (0 before the first).")
    ]
    dispatch_started_at: Annotated[
        str | None,
        Field(description="When the executor was first called: from then an effect may exist."),
    ] = None
    approval: Annotated[
        AttemptApproval | None,
        Field(description="How it was approved (absent for attempts from before approval kinds)."),
    ] = None
    result: Annotated[AttemptResult | None, Field(description="The recorded outcome.")] = None
    resolution: Annotated[
        AttemptResolution | None, Field(description="An admin's resolution, once resolved.")
    ] = None
    acknowledgement: Annotated[
        AttemptAcknowledgement | None,
        Field(description="A failed_safe attempt an admin acknowledged (off the attention list)."),
    ] = None


VIEW_FIELDS: tuple[str, ...] = tuple(AttemptStatusView.model_fields)
"""Every field of the view, in the order a row lists them."""
SHOWN_ALWAYS: tuple[str, ...] = tuple(
    name for name, info in AttemptStatusView.model_fields.items() if info.is_required()
)
SHOWN_WHEN_SET: tuple[str, ...] = tuple(name for name in VIEW_FIELDS if name not in SHOWN_ALWAYS)
"""The optional fields: a row leaves them out until they have a value."""
ROW_ONLY_FIELDS = ("owner_actor_id", "chain_head")
"""Stored with the view, never shown: whose attempt it is, and the hash of the
newest event folded (the audit's anchor)."""


def shown_result(kind: str, reason_code: Any, receipt: Any) -> dict[str, Any]:
    """What the view shows of a recorded result (never its source)."""
    shown: dict[str, Any] = {"kind": kind}
    if reason_code is not None:
        shown["reason_code"] = reason_code
    if receipt:
        shown["receipt"] = dict(receipt)
    return shown


def shown_resolution(outcome: Any, reason: Any, resolved_by: Any, at: Any) -> dict[str, Any]:
    """What the view shows of an admin's resolution (never its receipt)."""
    return {"outcome": outcome, "reason": reason, "resolved_by": resolved_by, "resolved_at": at}


def view_of(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The view from a value for every field of ``VIEW_FIELDS`` (None: not set)."""
    view = {name: fields[name] for name in SHOWN_ALWAYS}
    for name in SHOWN_WHEN_SET:
        value = fields[name]
        if value is not None:
            view[name] = value
    return view


def attempt_status_view(attempt: ExecutionAttempt) -> dict[str, Any]:
    """The view read off an aggregate's own fields.

    The fold (``projections.status_fold``) is how every row is made; this is
    what it must agree with: the aggregate keeps its own transitions for the
    domain's decisions, and ``tests/unit/test_status_fold.py`` folds random
    histories both ways and compares the rows byte for byte.
    """
    result = attempt.result
    resolution = attempt.resolution
    return view_of(
        {
            "attempt_id": attempt.id,
            "proposal_id": attempt.proposal_id,
            "proposal_version": attempt.proposal_version,
            "status": attempt.status.value,
            "revision": attempt.revision,
            "delivery_mode": attempt.delivery_mode.value,
            "created_at": attempt.created_at,
            "updated_at": attempt.updated_at,
            "lease_generation": attempt.lease_generation,
            "dispatch_started_at": attempt.dispatch_started_at,
            "approval": None if attempt.approval is None else dict(attempt.approval),
            "result": None
            if result is None
            else shown_result(result["kind"], result.get("reason_code"), result.get("receipt")),
            "resolution": None
            if resolution is None
            else shown_resolution(
                resolution["outcome"],
                resolution["reason"],
                resolution["resolved_by"],
                resolution["resolved_at"],
            ),
            "acknowledgement": None
            if attempt.acknowledgement is None
            else dict(attempt.acknowledgement),
        }
    )


STATUS_VIEW = "attempt_status"


def status_list_key(status: str) -> str:
    """The list partition of attempts in one status."""
    return f"status#{status}"


def status_record(attempt: ExecutionAttempt) -> ViewRecord:
    """The stored row of an aggregate's own view (``attempt_status_view``): what
    the tests hold the fold's rows to, and what the benchmark's rebuilds
    through the aggregate (``adapters.rebuild``'s comparison paths) write."""
    return status_row(
        attempt_status_view(attempt),
        version=attempt.version,
        owner_actor_id=attempt.actor_id,
        chain_head=attempt.chain_head,
    )


def status_row(
    view: dict[str, Any], *, version: int, owner_actor_id: Any, chain_head: str
) -> ViewRecord:
    """The stored row of a status view, with what access checks and audits need.

    Listed by status, oldest change first (the attention list reads the
    ``outcome_unknown``, ``effect_after_no_effect`` and ``failed_safe`` lists).
    """
    view["owner_actor_id"] = owner_actor_id
    view["chain_head"] = chain_head
    key = view["attempt_id"]
    return ViewRecord(
        name=STATUS_VIEW,
        key=key,
        version=version,
        data=view,
        list_pk=status_list_key(view["status"]),
        list_sk=f"{view['updated_at']}#{key}",
    )


def public_view(data: dict[str, Any] | Any) -> dict[str, Any]:
    """The stored view without the fields that are only for the ledger itself."""
    return {k: v for k, v in dict(data).items() if k not in ROW_ONLY_FIELDS}
