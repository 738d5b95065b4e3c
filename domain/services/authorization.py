"""The I7 authorization check, shared by approval and the pre-dispatch recheck.

Reads every directory record the decision depends on, from exact stored ids,
and returns them (and the target it found absent) so the caller can
condition-check in its commit that none changed in between. Because of that
check the records may come from the read cache (``DirectoryReads``): a stale
one fails the commit, never authorizes. The callers judge a refusal reached
on cached records again on fresh reads, so a stale entry cannot refuse what
the directory allows either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from domain.approvals import ApprovalKind, needs_channel
from domain.directory import (
    POLICY_SET_RECORD_ID,
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    standing_grant_fence_id,
    standing_grant_record_id,
    target_record_id,
)
from domain.errors import InvalidPolicySet
from domain.policy import NO_POLICIES, PolicyDecision, Verdict
from domain.ports import ReadCheck
from domain.services.context import ServiceContext
from domain.services.policy_decisions import decide, groups_of, policy_set_snapshot
from domain.services.read_cache import (
    DirectorySnapshot,
    read_directory,
    read_directory_at,
    read_directory_latest,
)
from domain.spec import ProposalSpec
from domain.standing_grants import fence_of


class AuthorizationFailed(Exception):
    """Some part of I7 does not hold; ``reason`` is a bounded, redacted code.
    ``policy_ids``: for ``policy_denied``, the forbid policies that hold."""

    def __init__(self, reason: str, policy_ids: tuple[str, ...] = ()) -> None:
        self.reason = reason
        self.policy_ids = policy_ids
        super().__init__(reason)


class TargetDrift(Exception):
    """The tracked target's revision is not the spec's base revision."""

    def __init__(self, target: DirectorySnapshot) -> None:
        self.target = target
        super().__init__("target_drift")


@dataclass(frozen=True)
class Approver:
    """The exact ids an approval is bound to."""

    actor_id: str
    identity_binding_id: str
    channel_binding_id: str
    conversation_key: str


@dataclass(frozen=True)
class Basis:
    """How the version is (or is to be) approved, which decides what else an
    authorization checks: a person through a presentation (``human``, and
    ``quorum``) needs the identity and channel bindings; a ``policy`` approval
    needs the policy set to approve it automatically still; a ``grant``
    approval needs the standing grant it used, not revoked (for a grant with
    use shards: the fence of the shard its use came from, still absent)."""

    kind: ApprovalKind = ApprovalKind.HUMAN
    grant_id: str | None = None
    ballots: tuple[Approver, ...] = ()
    """``quorum``: every counted voter, each checked like a person's approval."""
    group: str | None = None
    """``quorum``: the group the voters were counted in."""
    escalated: bool = False
    """``quorum``: the version had escalated; ``group`` is the fallback group its
    escalation recorded, which decides it whatever the policy set says now."""
    grant_shard: int | None = None
    """``grant``: the use shard the use came from (None: a grant that counts its
    uses on its own record)."""
    grant_fence: int | None = None
    """``grant``: that shard's fence, when known before the grant is read."""

    @classmethod
    def of(cls, approval: dict[str, object] | None) -> Basis:
        """The basis of a recorded approval (None: a human one)."""
        if approval is None:
            return HUMAN
        kind = ApprovalKind(str(approval["kind"]))
        grant = approval.get("grant_id")
        raw = approval.get("ballots")
        ballots = tuple(Approver(*map(str, b)) for b in raw) if isinstance(raw, list) else ()
        group = approval.get("group")
        shard = approval.get("shard")
        return cls(
            kind,
            str(grant) if grant is not None else None,
            ballots,
            str(group) if group is not None else None,
            approval.get("escalated") is True,
            int(shard) if isinstance(shard, int) else None,
        )


HUMAN = Basis()


@dataclass
class Authorization:
    """The directory records read, what they say about delivery, and the policy
    set's verdict (its record is among ``records``, version 0 when absent)."""

    delivery_mode: str
    records: list[DirectorySnapshot] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    decision: PolicyDecision = NO_POLICIES
    policy_set: DirectorySnapshot | None = None

    @property
    def read_set(self) -> list[ReadCheck]:
        """Every record at the version read; an absent target must still be absent."""
        return [ReadCheck(r.id, r.version) for r in self.records] + [
            ReadCheck(stream_id, 0) for stream_id in self.absent
        ]


def directory_ids(who: Approver, spec: ProposalSpec, basis: Basis = HUMAN) -> list[str]:
    """The stream ids of every directory record an authorization reads."""
    ids = [actor_record_id(who.actor_id)]
    if needs_channel(basis.kind):
        ids += [
            identity_binding_record_id(who.identity_binding_id),
            channel_binding_record_id(who.channel_binding_id),
        ]
    ids += [
        grant_record_id(who.actor_id, spec.permission),
        executor_build_record_id(spec.capability, spec.executor_build),
        POLICY_SET_RECORD_ID,
    ]
    if basis.kind is ApprovalKind.GRANT and basis.grant_id is not None:
        ids.append(standing_grant_record_id(basis.grant_id))
        if basis.grant_fence is not None:
            ids.append(standing_grant_fence_id(basis.grant_id, basis.grant_fence))
    if spec.target is not None:
        ids.append(target_record_id(spec.target.id))
    for ballot in basis.ballots:
        ids += ballot_ids(ballot)
    return ids


def ballot_ids(voter: Approver) -> list[str]:
    """A quorum voter's records: actor (enabled, groups), identity and channel binding."""
    return [
        actor_record_id(voter.actor_id),
        identity_binding_record_id(voter.identity_binding_id),
        channel_binding_record_id(voter.channel_binding_id),
    ]


def check_ballot(
    source: DirectoryReads, voter: Approver, group: str | None, requester_id: str
) -> list[DirectorySnapshot]:
    """I13 for one voter: not the requesting actor, enabled, a member of the
    group, bound through this identity and conversation; its records (for the
    commit's read checks), or ``AuthorizationFailed``."""
    if voter.actor_id == requester_id:
        raise AuthorizationFailed("requester_not_counted")
    found = [source.get(i) for i in ballot_ids(voter)]
    actor, identity, channel = found
    if actor is None or identity is None or channel is None:
        raise AuthorizationFailed("directory_record_missing")
    if not actor.flag("enabled"):
        raise AuthorizationFailed("voter_disabled")
    if group is None or group not in groups_of(actor):
        raise AuthorizationFailed("voter_not_member")
    _check_bindings(voter, identity, channel)
    return [actor, identity, channel]


class DirectoryReads:
    """Where an authorization gets its records.

    ``fresh``: from the store, always, one stream at a time. Otherwise from the
    read cache, then (with ``pins``, the versions an approval authorized,
    stored on ``Queued``) from one batched read of exactly those versions, or
    (without pins) from one batched read of the newest version of every record
    the cache lacks, then from the store. A refusal reached on anything but
    fresh reads is judged again on fresh ones by the caller before it is
    acted on.
    """

    def __init__(
        self,
        ctx: ServiceContext,
        *,
        fresh: bool = True,
        pins: Sequence[tuple[str, int]] | None = None,
    ) -> None:
        self.ctx = ctx
        self.fresh = fresh or not ctx.cache.enabled
        self.pins = {stream_id: version for stream_id, version in pins or ()}
        self._pinned: Mapping[str, DirectorySnapshot] = {}
        self._absent: set[str] = set()

    def prefetch(self, stream_ids: Sequence[str]) -> None:
        """Read at once every record the cache does not hold: with pins, at the
        pinned versions (and those the cache holds at a version older than the
        approval saw, known stale); without, at their newest versions."""
        if self.fresh:
            return
        if not self.pins:
            lacking = [
                i for i in stream_ids if not isinstance(self.ctx.cache.get(i), DirectorySnapshot)
            ]
            if len(lacking) > 1:  # one record is one read either way
                self._pinned, self._absent = read_directory_latest(
                    self.ctx.store, self.ctx.cache, lacking
                )
            return
        missing = [
            (i, self.pins[i])
            for i in stream_ids  # version 0: was untracked
            if self.pins.get(i, 0) > 0 and _older(self.ctx.cache.get(i), self.pins[i])
        ]
        self._pinned = read_directory_at(self.ctx.store, self.ctx.cache, missing)

    def get(self, stream_id: str) -> DirectorySnapshot | None:
        pinned = self._pinned.get(stream_id)
        if pinned is not None:
            return pinned
        if stream_id in self._absent:
            return None  # no events at the batched read; the commit checks it is still so
        if not self.fresh and self.pins.get(stream_id) == 0:
            return None  # untracked at approval; the commit checks it still is
        found, _ = read_directory(self.ctx.store, self.ctx.cache, stream_id, fresh=self.fresh)
        return found


def _older(held: object, version: int) -> bool:
    return not isinstance(held, DirectorySnapshot) or held.version < version


def authorize(
    ctx: ServiceContext,
    who: Approver,
    spec: ProposalSpec,
    now: datetime,
    reads: DirectoryReads | None = None,
    basis: Basis = HUMAN,
) -> Authorization:
    """Check actor, bindings (for a person's approval), permission, executor
    build, the policy set (I15: nothing it forbids; for a ``policy`` approval,
    still approved by it), the standing grant of a ``grant`` approval (I14: not
    revoked) and target; raise on failure.

    Without ``reads`` every record is read fresh from its stream."""
    if spec.expires_at <= now:
        raise AuthorizationFailed("spec_expired")
    if spec.permission not in ctx.permissions:
        raise AuthorizationFailed("permission_not_in_catalogue")
    source = reads or DirectoryReads(ctx, fresh=True)
    source.prefetch(directory_ids(who, spec, basis))
    records: list[DirectorySnapshot] = []

    def need(stream_id: str) -> DirectorySnapshot:
        found = source.get(stream_id)
        if found is None:
            raise AuthorizationFailed("directory_record_missing")
        records.append(found)
        return found

    actor = need(actor_record_id(who.actor_id))
    if needs_channel(basis.kind):
        identity = need(identity_binding_record_id(who.identity_binding_id))
        channel = need(channel_binding_record_id(who.channel_binding_id))
    grant = need(grant_record_id(who.actor_id, spec.permission))
    build = need(executor_build_record_id(spec.capability, spec.executor_build))
    if not actor.flag("enabled"):
        raise AuthorizationFailed("actor_disabled")
    if needs_channel(basis.kind):
        _check_bindings(who, identity, channel)
    if not grant.flag("granted"):
        raise AuthorizationFailed("permission_not_granted")
    if not build.flag("available"):
        raise AuthorizationFailed("executor_build_unavailable")
    # Whether THIS process hosts the build is no part of I7 (I11): the directory
    # says which builds may run, and only a worker that hosts the build leases
    # its attempts. Where it is hosted here, its delivery mode must agree.
    executor = (
        ctx.registry.get(spec.capability, spec.executor_build) if ctx.registry is not None else None
    )
    if executor is not None and executor.delivery_mode.value != build.text("delivery_mode"):
        raise AuthorizationFailed("delivery_mode_mismatch")
    policy_set = policy_set_snapshot(source)
    records.append(policy_set)
    decision = _policy_verdict(policy_set, who, actor, spec, now, basis)
    if basis.kind is ApprovalKind.QUORUM and basis.ballots:
        # An escalated version is decided by the fallback group its escalation
        # recorded (immutable: once per version, before the claim), as the
        # approval counted it; otherwise by the quorum the policy set asks now.
        # Either way every voter is checked again: one disabled, unbound or
        # removed from that group since fails it.
        group = basis.group
        if not basis.escalated and decision.quorum is not None:
            group = decision.quorum.group
        for ballot in basis.ballots:
            records += check_ballot(source, ballot, group, who.actor_id)
    absent: list[str] = []
    if basis.kind is ApprovalKind.GRANT:
        absent += _standing_grant(source, basis, who, records)
    if spec.target is not None:
        target_id = target_record_id(spec.target.id)
        target = source.get(target_id)
        if target is None:
            # Untracked target: nothing to compare, but it must still be untracked
            # when the decision commits (a missing record is never cached).
            absent.append(target_id)
        else:
            if target.text("revision") != spec.target.base_revision:
                raise TargetDrift(target)
            records.append(target)
    return Authorization(
        delivery_mode=build.text("delivery_mode"),
        records=records,
        absent=absent,
        decision=decision,
        policy_set=policy_set,
    )


def _check_bindings(who: Approver, identity: DirectorySnapshot, channel: DirectorySnapshot) -> None:
    if not identity.flag("active") or identity.text("actor_id") != who.actor_id:
        raise AuthorizationFailed("identity_binding")
    if (
        not channel.flag("active")
        or channel.text("conversation_key") != who.conversation_key
        or channel.text("channel") != identity.text("channel")
    ):
        raise AuthorizationFailed("channel_binding")


def _policy_verdict(
    policy_set: DirectorySnapshot,
    who: Approver,
    actor: DirectorySnapshot,
    spec: ProposalSpec,
    now: datetime,
    basis: Basis,
) -> PolicyDecision:
    """I15: nothing forbids it now; a ``policy`` approval still stands."""
    try:
        decision = decide(policy_set, who.actor_id, groups_of(actor), spec, now)
    except InvalidPolicySet:
        raise AuthorizationFailed("policy_set_invalid") from None
    if decision.verdict is Verdict.DENIED:
        raise AuthorizationFailed("policy_denied", decision.policy_ids)
    if basis.kind is ApprovalKind.POLICY and decision.verdict is not Verdict.AUTO_APPROVE:
        raise AuthorizationFailed("policy_approval_withdrawn")
    return decision


def _standing_grant(
    source: DirectoryReads, basis: Basis, who: Approver, records: list[DirectorySnapshot]
) -> list[str]:
    """I14 after the claim: the grant that approved it is the actor's and not
    revoked (expiry and the count bound uses, not the attempts they made). The
    commit checks, for a grant without use shards, its record; with them, the
    fence of the use's shard absent (the ids returned), not the record: no
    use moves it, and its revocation makes that fence in the same commit."""
    grant_id = basis.grant_id or ""
    record = source.get(standing_grant_record_id(grant_id))
    if record is None:
        raise AuthorizationFailed("directory_record_missing")
    if record.text("actor_id") != who.actor_id:
        raise AuthorizationFailed("standing_grant_missing")
    if record.flag("revoked"):
        raise AuthorizationFailed("standing_grant_revoked")
    if basis.grant_shard is None:
        records.append(record)
        return []
    number = basis.grant_fence
    if number is None:
        number = fence_of(record.values, basis.grant_shard)
    fence = standing_grant_fence_id(grant_id, number)
    if source.get(fence) is not None:
        raise AuthorizationFailed("standing_grant_revoked")
    return [fence]
