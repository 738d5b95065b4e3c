"""What a new proposal version meets before anyone sees it: the policy set and
the actor's standing grants (design.md 5.1, 2.7; docs/policies.md).

``screen`` runs in ``propose`` once the spec is acceptable:

- with a policy set configured, the spec's ``policy_digest`` must be the set's
  digest (what ``GET /policies`` answers), or ``PolicyDigestMismatch``;
- a ``forbid`` that holds refuses the proposal (``PolicyDenied``, naming the
  policies): nothing is stored;
- a ``permit`` marked ``@auto_approve`` that holds, or else a live standing
  grant of the actor whose bounds cover the spec, approves it: the version is
  claimed in the same commit that stores it (``Claimed`` + ``Queued`` + the
  due entry, and for a grant its ``Used`` event, on one of its use shards when
  it has them, ``grant_shards.py``), with a read check of every directory
  record the decision relied on (the policy set's version among them; for a
  sharded grant the fence of its shard), exactly the shape of a person's
  approval (design.md 5.2). The worker rechecks it before dispatch like any
  other (I7, I15, I14);
- a ``permit`` marked ``@quorum`` that holds leaves it to M members of a group
  (``quorum.py``): no standing grant of the requester's approves it;
- otherwise a person decides, as before.

Every proposal's commit checks the policy set's version it was screened under
(version 0: none), so no proposal is stored as "not forbidden" under a set
that has changed since. Without a policy set and without standing grants,
the answer is what it was before policies.

A decision reached on cached records is only acted on through a commit that
checks them; a refusal reached on cached records is judged again on fresh ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from domain.approvals import ApprovalKind, grant_approval, policy_approval
from domain.directory import (
    DirectoryRecord,
    actor_record_id,
    standing_grant_index_id,
    standing_grant_record_id,
)
from domain.errors import ConcurrencyConflict, PolicyDenied, PolicyDigestMismatch
from domain.policy import PolicyDecision, Verdict
from domain.ports import DueWork, ReadCheck
from domain.proposal import Proposal
from domain.services.authorization import (
    Approver,
    Authorization,
    AuthorizationFailed,
    Basis,
    DirectoryReads,
    TargetDrift,
    authorize,
)
from domain.services.claims import queued_attempt
from domain.services.context import ServiceContext
from domain.services.grant_shards import ShardPick, pick_shard, take_use
from domain.services.policy_decisions import configured, decide, groups_of, policy_set_snapshot
from domain.spec import ProposalSpec
from domain.standing_grants import (
    GrantState,
    covers,
    fence_of,
    indexed_ids,
    is_sharded,
    state_of,
    with_use,
)
from domain.timeutil import format_utc


@dataclass
class Automatic:
    """What approves the proposal without a person, and on which records."""

    approval_kind: ApprovalKind
    authorization: Authorization
    grant: dict[str, Any] | None = None
    grant_version: int = 0
    pick: ShardPick | None = None
    """A grant with use shards: the shard the use is to come from."""


@dataclass
class Screening:
    """The verdict on a new version and what its commit must check."""

    decision: PolicyDecision
    read_set: list[ReadCheck] = field(default_factory=list)
    automatic: Automatic | None = None


def screen(
    ctx: ServiceContext,
    actor_id: str,
    spec: ProposalSpec,
    now: datetime,
    *,
    automatic: bool = True,
    seed: str = "",
) -> Screening:
    """Policy digest, forbid, and what (if anything) approves the version by itself.

    ``seed`` (the proposal's id) spreads the claims of one standing grant over
    its use shards."""
    if not ctx.cache.enabled:
        return _screen(ctx, actor_id, spec, now, automatic, seed, fresh=True)
    try:
        return _screen(ctx, actor_id, spec, now, automatic, seed, fresh=False)
    except (PolicyDenied, PolicyDigestMismatch):
        pass  # judged on cached records: a stale entry must not refuse either
    return _screen(ctx, actor_id, spec, now, automatic, seed, fresh=True)


def _screen(
    ctx: ServiceContext,
    actor_id: str,
    spec: ProposalSpec,
    now: datetime,
    automatic: bool,
    seed: str,
    *,
    fresh: bool,
) -> Screening:
    reads = DirectoryReads(ctx, fresh=fresh)
    policy_set = policy_set_snapshot(reads)
    policies = configured(policy_set)
    if policies is not None and spec.policy_digest != policies.digest:
        raise PolicyDigestMismatch()
    actor = reads.get(actor_record_id(actor_id))
    groups = groups_of(actor) if actor is not None else ()
    decision = decide(policy_set, actor_id, groups, spec, now)
    if decision.verdict is Verdict.DENIED:
        raise PolicyDenied(decision.policy_ids)
    screening = Screening(decision, read_set=[ReadCheck(policy_set.id, policy_set.version)])
    if automatic:
        screening.automatic = _automatic(ctx, reads, actor_id, spec, now, decision, seed)
    return screening


def _automatic(
    ctx: ServiceContext,
    reads: DirectoryReads,
    actor_id: str,
    spec: ProposalSpec,
    now: datetime,
    decision: PolicyDecision,
    seed: str,
) -> Automatic | None:
    """A policy's automatic approval, else the first live covering grant's, if
    the rest of the authorization holds (actor enabled, permission granted,
    build available, target at its base revision); else None (a person decides:
    what fails here fails at their approval too). A grant with use shards is
    live while one of its shards has room (``grant_shards.pick_shard``)."""
    who = Approver(actor_id, "", "", "")
    if decision.verdict is Verdict.QUORUM:
        return None  # members decide: no standing grant of the requester's stands in
    if decision.verdict is Verdict.AUTO_APPROVE:
        authorization = _authorized(ctx, who, spec, now, reads, Basis(ApprovalKind.POLICY))
        if authorization is not None:
            return Automatic(ApprovalKind.POLICY, authorization)
        return None
    index = reads.get(standing_grant_index_id(actor_id))
    ids = indexed_ids(index.values if index is not None else None)
    if not ids:
        return None
    reads.prefetch([standing_grant_record_id(i) for i in ids])
    for grant_id in ids:
        record = reads.get(standing_grant_record_id(grant_id))
        if record is None or record.text("actor_id") != actor_id:
            continue
        grant = dict(record.values)
        if state_of(grant, now) is not GrantState.ACTIVE or not covers(grant, spec):
            continue
        pick = None
        if is_sharded(grant):
            pick = pick_shard(ctx, grant, seed)
            if pick is None:
                continue  # every shard has given its quota: spent
        basis = Basis(
            ApprovalKind.GRANT,
            grant_id,
            grant_shard=pick.shard if pick else None,
            grant_fence=fence_of(grant, pick.shard) if pick else None,
        )
        authorization = _authorized(ctx, who, spec, now, reads, basis)
        if authorization is None:
            return None
        return Automatic(ApprovalKind.GRANT, authorization, grant, record.version, pick)
    return None


def _authorized(
    ctx: ServiceContext,
    who: Approver,
    spec: ProposalSpec,
    now: datetime,
    reads: DirectoryReads,
    basis: Basis,
) -> Authorization | None:
    try:
        return authorize(ctx, who, spec, now, reads, basis)
    except (AuthorizationFailed, TargetDrift):
        return None


@dataclass
class Claim:
    """What an automatic claim adds to the proposal's commit."""

    aggregates: list[Any]
    read_set: list[ReadCheck]
    due: list[DueWork]
    attempt_id: str
    approval: dict[str, Any]


def claim_automatically(
    ctx: ServiceContext,
    automatic: Automatic,
    proposal: Proposal,
    version: int,
    spec: ProposalSpec,
    now: datetime,
) -> Claim:
    """Claim ``version`` of ``proposal`` (pending, not yet committed) for the
    policy or grant in ``automatic``: the attempt, ``Claimed``, the grant's
    use, the read set and the due entry of one atomic commit."""
    auth = automatic.authorization
    record = proposal.versions[version]
    aggregates: list[Any] = []
    read_set = list(auth.read_set)
    if automatic.approval_kind is ApprovalKind.GRANT and automatic.pick is not None:
        assert automatic.grant is not None
        grant = automatic.grant
        used_shard, use = take_use(
            grant, automatic.pick, proposal_id=proposal.id, version=version, now=now
        )
        approval = grant_approval(
            str(grant["grant_id"]), use, int(grant["max_uses"]), shard=automatic.pick.shard
        )
        aggregates.append(used_shard)
        # The shard's append and its fence's check (in the read set) are the
        # grant's whole part of the commit; the record is pinned for the recheck.
        authorized = [[c.stream_id, c.version] for c in read_set]
        authorized.append([standing_grant_record_id(grant["grant_id"]), automatic.grant_version])
    elif automatic.approval_kind is ApprovalKind.GRANT:
        assert automatic.grant is not None
        grant_stream = standing_grant_record_id(automatic.grant["grant_id"])
        # The record to append to, from its stream: if it is not live and covering
        # there (spent, revoked since the read), the step decides again on fresh reads.
        grant_record = ctx.store.get(DirectoryRecord, grant_stream)
        if (
            grant_record is None
            or grant_record.text("actor_id") != proposal.actor_id
            or state_of(grant_record.values, now) is not GrantState.ACTIVE
            or not covers(grant_record.values, spec)
        ):
            ctx.cache.forget([grant_stream])
            raise ConcurrencyConflict(grant_stream)
        used = with_use(grant_record.values)
        approval = grant_approval(used["grant_id"], int(used["uses"]), int(used["max_uses"]))
        grant_record.record_use(
            used,
            grant_id=used["grant_id"],
            proposal_id=proposal.id,
            version=version,
            at=format_utc(now),
        )
        aggregates.append(grant_record)
        # The use's own append checks the grant's version; the attempt pins the new one.
        read_set = [c for c in read_set if c.stream_id != grant_stream]
        authorized = [[c.stream_id, c.version] for c in read_set]
        authorized.append([grant_stream, grant_record.version])
    else:
        assert auth.policy_set is not None
        approval = policy_approval(
            auth.decision.policy_id or "",
            auth.policy_set.version,
            auth.policy_set.text("digest"),
        )
        authorized = [[c.stream_id, c.version] for c in read_set]
    at = format_utc(now)
    attempt = queued_attempt(
        ctx,
        proposal,
        version,
        record,
        spec,
        delivery_mode=auth.delivery_mode,
        at=at,
        authorized=authorized,
        approval=approval,
    )
    attempt_id = attempt.id
    proposal.claim_automatically(
        version=version, attempt_id=attempt_id, approval=approval, now=now, at=at
    )
    return Claim(
        aggregates=[attempt, *aggregates],
        read_set=read_set,
        due=[DueWork(attempt_id, now)],
        attempt_id=attempt_id,
        approval=approval,
    )
