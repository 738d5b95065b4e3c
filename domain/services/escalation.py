"""Escalating an unanswered approval to its fallback group (``domain.escalation``,
docs/policies.md).

Run by the runtime's housekeeping pass for every presented proposal version
whose expiry is within the longest lead time a policy may ask for. The policy
set is evaluated for the requesting actor now (the set in force decides, as at
an approval): a version escalates when a policy that holds names a fallback
group, its lead time has been reached, the version is still presented (no
claim, no decline, not expired) and it has not escalated before. The
``Escalated`` event is committed with the proposal's version check and the
policy set record's, so of two processes racing exactly one appends it and
the other, reading again, finds it escalated; a policy change in between makes
the step read again too.
"""

from __future__ import annotations

from domain.directory import POLICY_SET_RECORD_ID, actor_record_id
from domain.errors import InvalidPolicySet
from domain.policy import Verdict
from domain.ports import Commit, ReadCheck
from domain.proposal import Proposal, ProposalStatus
from domain.services.authorization import DirectoryReads
from domain.services.context import ServiceContext
from domain.services.policy_decisions import decide, groups_of, policy_set_snapshot
from domain.services.read_cache import commit
from domain.services.retry import retry_on_conflict
from domain.spec import stored_spec
from domain.timeutil import format_utc, parse_utc


def escalate_if_due(ctx: ServiceContext, proposal_id: str) -> bool:
    """Escalate the proposal's current version if it is due (module docstring);
    True when this call appended ``Escalated``."""
    return retry_on_conflict(lambda: _escalate_once(ctx, proposal_id), exhausted=lambda: False)


def _escalate_once(ctx: ServiceContext, proposal_id: str) -> bool:
    now = ctx.clock.now()
    proposal = ctx.store.get(Proposal, proposal_id)
    if proposal is None:
        return False
    version = proposal.current_version
    record = proposal.versions[version]
    if "escalated" in record:
        return False
    if proposal.effective_status(version, now) is not ProposalStatus.PRESENTED:
        return False
    spec = stored_spec(record["spec"], record["payload_hash"])
    if spec is None:
        return False
    reads = DirectoryReads(ctx, fresh=True)
    actor = reads.get(actor_record_id(proposal.actor_id))
    if actor is None:
        return False
    snapshot = policy_set_snapshot(reads)
    try:
        decision = decide(snapshot, proposal.actor_id, groups_of(actor), spec, now)
    except InvalidPolicySet:
        return False  # fails closed at any approval anyway
    rule = decision.escalation
    if rule is None or decision.verdict not in (Verdict.HUMAN, Verdict.QUORUM):
        return False
    if not rule.due(parse_utc(proposal.expiry_of(version)), now):
        return False
    proposal.escalate(
        version=version, group=rule.group, policy_id=rule.policy_id, now=now, at=format_utc(now)
    )
    work = Commit(
        aggregates=[proposal], read_set=[ReadCheck(POLICY_SET_RECORD_ID, snapshot.version)]
    )
    commit(ctx.store, ctx.cache, work)
    return True
