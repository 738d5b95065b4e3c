"""A quorum member's approval: a vote, or the M-th one that claims (design.md
5.2, I13; docs/policies.md).

Called by ``approve`` for a presentation made to a member (not to the
proposal's actor). The policy set is evaluated for the requesting actor as at
any approval; it must still ask for a quorum. Then:

- the voter must be valid now (``check_ballot``: not the requesting actor,
  enabled, a member of the group, bound through this identity and
  conversation);
- a voter who already voted for this version is not counted again: the
  answer is the count as it stands, nothing is appended; unless the votes
  recorded already reach what is asked now (a policy change or an escalation
  asks fewer than when they were cast), when this press claims the version
  with them (a replay of a consumed presentation is refused instead);
- the votes recorded before are counted again, each voter re-checked the same
  way (a voter disabled or removed from the group since is not counted);
- fewer than M with this one: ``VoteRecorded`` is appended (the presentation
  consumed), checked only by the proposal's version: one write;
- the M-th: the version is claimed exactly like a single approval, the claim
  recording every counted voter, in ONE commit whose read checks cover the
  requesting side's records and every counted voter's three records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from domain.approvals import ApprovalKind
from domain.directory import actor_record_id
from domain.errors import InvalidInput, InvalidPolicySet
from domain.escalation import escalated_rule
from domain.policy import PolicyDecision, Verdict
from domain.ports import Commit, DueWork, ReadCheck
from domain.proposal import BALLOT_FIELDS, PresentationStatus, Proposal
from domain.quorum import QuorumRule, distinct_votes, quorum_approval
from domain.services.authorization import (
    Approver,
    Authorization,
    AuthorizationFailed,
    Basis,
    DirectoryReads,
    authorize,
    check_ballot,
)
from domain.services.claims import queued_attempt
from domain.services.context import ServiceContext
from domain.services.policy_decisions import decide, groups_of, policy_set_snapshot
from domain.services.read_cache import DirectorySnapshot, commit
from domain.spec import ProposalSpec, stored_spec
from domain.timeutil import format_utc


@dataclass(frozen=True)
class Vote:
    """What one quorum approval did: ``vote_recorded`` with the count, or
    ``execution_pending`` with the attempt (the M-th vote claimed)."""

    status: str
    votes: int
    required: int
    attempt_id: str | None = None
    attempt_revision: int | None = None


class NotCounted(Exception):
    """The vote cannot count (``reason``: bounded, for logs only)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def vote(
    ctx: ServiceContext,
    proposal: Proposal,
    presentation_id: str,
    who: Approver,
    spec: ProposalSpec,
    now: datetime,
    reads: DirectoryReads,
    asserted_by: str | None,
) -> Vote:
    """Record this member's vote, or claim the version with it (module docstring)."""
    version = proposal.presentations[presentation_id]["version"]
    record = proposal.versions[version]
    requester = Approver(proposal.actor_id, "", "", "")
    try:
        auth = authorize(ctx, requester, spec, now, reads, Basis(ApprovalKind.QUORUM))
    except AuthorizationFailed as failed:
        raise NotCounted(failed.reason) from None
    rule = member_rule(auth.decision, record)
    if rule is None:
        raise NotCounted("quorum_not_required")
    # The voter first: one no longer counted (disabled, unbound, outside the group
    # an escalation named) is refused, even when an earlier vote of theirs is recorded.
    try:
        mine = check_ballot(reads, who, rule.group, requester.actor_id)
    except AuthorizationFailed as failed:
        raise NotCounted(failed.reason) from None
    earlier = distinct_votes(proposal.votes(version))
    if already_voted(earlier, who.actor_id):
        # A second presentation of the same voter, or a replay: never counted twice.
        counted, records = _valid_ballots(reads, earlier, rule, requester, rule.required)
        if len(counted) < rule.required:
            return Vote("vote_recorded", len(counted), rule.required)
        # The votes recorded reach what is asked now (a policy change or an
        # escalation asks fewer than when they were cast): this press, through a
        # presentation of its own, claims with them; a replay of a consumed one
        # cannot consume it again.
        if proposal.presentation_status(presentation_id, now) is PresentationStatus.CONSUMED:
            raise NotCounted("already_counted")
        return _claim(
            ctx,
            Claim(proposal, version, spec, auth, rule, presentation_id, asserted_by, now),
            counted,
            records,
        )
    counted, records = _valid_ballots(reads, earlier, rule, requester, rule.required - 1)
    if len(counted) + 1 < rule.required:
        proposal.record_vote(
            presentation_id=presentation_id, now=now, at=format_utc(now), asserted_by=asserted_by
        )
        commit(ctx.store, ctx.cache, Commit(aggregates=[proposal]))
        return Vote("vote_recorded", len(counted) + 1, rule.required)
    return _claim(
        ctx,
        Claim(proposal, version, spec, auth, rule, presentation_id, asserted_by, now),
        [*counted, who],
        [*records, *mine],
    )


@dataclass(frozen=True)
class Claim:
    """What a deciding vote claims, and the presentation it consumes."""

    proposal: Proposal
    version: int
    spec: ProposalSpec
    auth: Authorization
    rule: QuorumRule
    presentation_id: str
    asserted_by: str | None
    now: datetime


def _valid_ballots(
    reads: DirectoryReads,
    votes: Sequence[Mapping[str, Any]],
    rule: QuorumRule,
    requester: Approver,
    limit: int,
) -> tuple[list[Approver], list[DirectorySnapshot]]:
    """The recorded voters still counted (each re-checked), at most ``limit``,
    in vote order, and their records for the commit's read checks."""
    counted: list[Approver] = []
    records: list[DirectorySnapshot] = []
    for earlier_vote in votes:
        if len(counted) >= limit:
            break
        ballot = Approver(*(str(earlier_vote[k]) for k in BALLOT_FIELDS))
        try:
            records += check_ballot(reads, ballot, rule.group, requester.actor_id)
        except AuthorizationFailed:
            continue  # disabled, removed from the group or unbound since: not counted
        counted.append(ballot)
    return counted, records


def _claim(
    ctx: ServiceContext,
    claim: Claim,
    ballots: list[Approver],
    records: list[DirectorySnapshot],
) -> Vote:
    """Claim the version with these ballots in ONE commit (module docstring)."""
    proposal, version, rule, now = claim.proposal, claim.version, claim.rule, claim.now
    at = format_utc(now)
    escalated = "escalated" in proposal.versions[version]
    approval = quorum_approval(rule, [asdict(b) for b in ballots], escalated=escalated)
    read_set = claim.auth.read_set + [ReadCheck(r.id, r.version) for r in records]
    attempt = queued_attempt(
        ctx,
        proposal,
        version,
        proposal.versions[version],
        claim.spec,
        delivery_mode=claim.auth.delivery_mode,
        at=at,
        authorized=[[c.stream_id, c.version] for c in read_set],
        approval=approval,
    )
    proposal.claim(
        presentation_id=claim.presentation_id,
        attempt_id=attempt.id,
        now=now,
        at=at,
        asserted_by=claim.asserted_by,
        approval=approval,
    )
    commit(
        ctx.store,
        ctx.cache,
        Commit(aggregates=[proposal, attempt], read_set=read_set, due=[DueWork(attempt.id, now)]),
    )
    return Vote("execution_pending", rule.required, rule.required, attempt.id, attempt.version)


def member_rule(decision: PolicyDecision, record: Mapping[str, Any]) -> QuorumRule | None:
    """Who decides a version through members' votes now: the quorum the policy
    set asks for, or, once the version escalated, the fallback group
    (``domain.escalation``; a single approval becomes one member's). None: no
    member may decide it."""
    escalated = record.get("escalated")
    if escalated is not None and decision.verdict in (Verdict.QUORUM, Verdict.HUMAN):
        return escalated_rule(escalated, decision.quorum)
    if decision.verdict is Verdict.QUORUM:
        return decision.quorum
    return None


def already_voted(votes: Sequence[Mapping[str, Any]], actor_id: str) -> bool:
    """Whether this member's vote is already recorded for the version."""
    return any(vote["actor_id"] == actor_id for vote in votes)


def check_member_presentation(
    ctx: ServiceContext, proposal: Proposal, version: int, actor_id: str, now: datetime
) -> None:
    """A presentation may go to another actor than the proposal's only as a quorum
    member's own: the version must need a quorum now, or have escalated (then it
    goes to the fallback group's members only), and the member is never the
    requesting actor (``InvalidInput`` otherwise; membership is checked at the vote)."""
    record = proposal.versions.get(version)
    escalated = record is not None and "escalated" in record
    if actor_id == proposal.actor_id and not escalated:
        return
    if actor_id == proposal.actor_id:
        raise InvalidInput.at(
            "/actor_id",
            "an escalated version is presented to the fallback group's members only",
        )
    spec = stored_spec(record["spec"], record["payload_hash"]) if record else None
    if spec is None:
        raise InvalidInput.at("/version", "no such version of this proposal")
    reads = DirectoryReads(ctx, fresh=True)
    actor = reads.get(actor_record_id(proposal.actor_id))
    groups = groups_of(actor) if actor is not None else ()
    try:
        decision = decide(policy_set_snapshot(reads), proposal.actor_id, groups, spec, now)
    except InvalidPolicySet:
        decision = None
    if decision is None or record is None or member_rule(decision, record) is None:
        raise InvalidInput.at(
            "/actor_id",
            "a version is presented to another actor than its own only when a policy "
            "asks for a quorum (docs/policies.md)",
        )
