"""The attempt a claim queues, built once for every way a proposal version is
approved: by a person, by a quorum's last vote, by a policy or by a standing
grant (design.md 5.2). Only who it is bound to and how it was approved differ."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.attempt import ExecutionAttempt
from domain.proposal import Proposal
from domain.services.authorization import Approver
from domain.services.context import ServiceContext
from domain.spec import ProposalSpec, derive_attempt_id, derive_idempotency_key
from domain.tracing import clean_trace_context


def queued_attempt(
    ctx: ServiceContext,
    proposal: Proposal,
    version: int,
    record: Mapping[str, Any],
    spec: ProposalSpec,
    *,
    delivery_mode: str,
    at: str,
    authorized: list[list[Any]],
    approval: dict[str, Any],
    approver: Approver | None = None,
) -> ExecutionAttempt:
    """The new attempt of ``version`` (``record`` is its stored version record).

    ``approver``: the person whose approval claims it, with the bindings it came
    through; without one (a quorum, a policy, a grant) the attempt is bound to
    the proposal's actor and to no binding."""
    payload_hash = record["payload_hash"]
    return ExecutionAttempt(
        attempt_id=derive_attempt_id(proposal.id, version, payload_hash),
        proposal_id=proposal.id,
        proposal_version=version,
        payload_hash=payload_hash,
        view_hash=record["view_hash"],
        idempotency_key=derive_idempotency_key(proposal.id, version, payload_hash),
        capability=spec.capability,
        executor_build=spec.executor_build,
        delivery_mode=delivery_mode,
        actor_id=approver.actor_id if approver else proposal.actor_id,
        identity_binding_id=approver.identity_binding_id if approver else "",
        channel_binding_id=approver.channel_binding_id if approver else "",
        conversation_key=approver.conversation_key if approver else "",
        permission=spec.permission,
        target_id=spec.target.id if spec.target else None,
        target_revision=spec.target.base_revision if spec.target else None,
        at=at,
        trace_context=clean_trace_context(ctx.tracer.current_context()),
        spec=record["spec"],
        authorized=authorized,
        approval=approval,
    )
