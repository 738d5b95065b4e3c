"""The worker's pre-dispatch recheck (I7 again, I4): is the attempt still
authorized, on the stored spec whose hashes were approved?

The recheck reads every directory record from the exact ids stored on the
attempt; the dispatch marker then condition-checks that none of them changed,
so the authorization that dispatch relies on is the one in force at the marker.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from domain.attempt import ExecutionAttempt
from domain.errors import InvalidSpec
from domain.ports import Executor
from domain.proposal import Proposal, ProposalStatus
from domain.services.authorization import (
    Approver,
    Authorization,
    AuthorizationFailed,
    Basis,
    DirectoryReads,
    TargetDrift,
    authorize,
)
from domain.services.context import ServiceContext
from domain.spec import ProposalSpec, stored_spec


class NotHosted(Exception):
    """This worker's registry has no executor for the attempt's build.

    Never a refusal (I11): the worker releases the lease for a worker that has
    the build. The worker leases only what it hosts (``hosting.py``), so this
    is a defence against a registry that changed under a lease.
    """


@dataclass(frozen=True)
class Checked:
    """A passed pre-dispatch recheck."""

    spec: ProposalSpec
    executor: Executor
    authorization: Authorization


def confirmed_recheck(ctx: ServiceContext, attempt: ExecutionAttempt, fresh: bool) -> Checked:
    """The recheck; a refusal judged on cached or pinned records is judged
    again on fresh reads (a stale entry must not refuse either)."""
    if fresh or not ctx.cache.enabled:
        return recheck(ctx, attempt, ctx.clock.now(), fresh=True)
    try:
        return recheck(ctx, attempt, ctx.clock.now(), fresh=False)
    except (AuthorizationFailed, TargetDrift):
        pass
    ctx.cache.forget([attempt.proposal_id, *(i for i, _ in attempt.authorized or ())])
    return recheck(ctx, attempt, ctx.clock.now(), fresh=True)


def recheck(
    ctx: ServiceContext, attempt: ExecutionAttempt, now: datetime, *, fresh: bool
) -> Checked:
    """I7 again, from the exact stored ids; I4: the stored spec, hashes intact.

    Not ``fresh`` and with what the approval stored on ``Queued``: the spec
    from there (its hash is the approved payload hash; a claimed proposal
    version never changes again and the attempt exists only with its
    claim, I3), and the directory records from the cache or, for those it
    lacks, one batched read of the versions the approval authorized."""
    if not fresh and attempt.spec is not None:
        spec = _queued_spec(attempt)
        pins = attempt.authorized
    else:
        spec = _claimed_spec(ctx, attempt)
        pins = None
    if spec.capability != attempt.capability or spec.executor_build != attempt.executor_build:
        raise AuthorizationFailed("executor_build_mismatch")
    who = Approver(
        attempt.actor_id,
        attempt.identity_binding_id,
        attempt.channel_binding_id,
        attempt.conversation_key,
    )
    reads = DirectoryReads(ctx, fresh=fresh, pins=pins)
    # The same approval kind as at the claim: a person's approval needs its
    # bindings still; a policy's, the policy set's automatic approval; a
    # standing grant's, the grant unrevoked. A policy that now forbids it fails
    # it safe (``policy_denied``, I15) whatever approved it.
    authorization = authorize(ctx, who, spec, now, reads, Basis.of(attempt.approval))
    if authorization.delivery_mode != attempt.delivery_mode.value:
        raise AuthorizationFailed("delivery_mode_mismatch")
    executor = (
        ctx.registry.get(attempt.capability, attempt.executor_build)
        if ctx.registry is not None
        else None
    )
    if executor is None:
        raise NotHosted()
    return Checked(spec=spec, executor=executor, authorization=authorization)


def _queued_spec(attempt: ExecutionAttempt) -> ProposalSpec:
    try:
        spec = stored_spec(attempt.spec, attempt.payload_hash)
    except InvalidSpec:
        raise AuthorizationFailed("stored_spec_invalid") from None
    if spec is None:
        raise AuthorizationFailed("hash_mismatch")
    return spec


def _claimed_spec(ctx: ServiceContext, attempt: ExecutionAttempt) -> ProposalSpec:
    proposal = ctx.store.get(Proposal, attempt.proposal_id)
    record = proposal.version_record(attempt.proposal_version) if proposal else None
    if (
        record is None
        or record["status"] != ProposalStatus.CLAIMED.value
        or record["attempt_id"] != attempt.id
    ):
        raise AuthorizationFailed("proposal_not_claimed")
    try:
        spec = stored_spec(record["spec"], attempt.payload_hash)
    except InvalidSpec:
        raise AuthorizationFailed("stored_spec_invalid") from None
    if (
        spec is None
        or record["payload_hash"] != attempt.payload_hash
        or record["view_hash"] != attempt.view_hash
    ):
        raise AuthorizationFailed("hash_mismatch")
    return spec
