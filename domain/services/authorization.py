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

from domain.directory import (
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    target_record_id,
)
from domain.ports import ReadCheck
from domain.services.context import ServiceContext
from domain.services.read_cache import (
    DirectorySnapshot,
    read_directory,
    read_directory_at,
    read_directory_latest,
)
from domain.spec import ProposalSpec


class AuthorizationFailed(Exception):
    """Some part of I7 does not hold; ``reason`` is a bounded, redacted code."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
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


@dataclass
class Authorization:
    """The directory records read, and what they say about delivery."""

    delivery_mode: str
    records: list[DirectorySnapshot] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)

    @property
    def read_set(self) -> list[ReadCheck]:
        """Every record at the version read; an absent target must still be absent."""
        return [ReadCheck(r.id, r.version) for r in self.records] + [
            ReadCheck(stream_id, 0) for stream_id in self.absent
        ]


def directory_ids(who: Approver, spec: ProposalSpec) -> list[str]:
    """The stream ids of every directory record an authorization reads."""
    ids = [
        actor_record_id(who.actor_id),
        identity_binding_record_id(who.identity_binding_id),
        channel_binding_record_id(who.channel_binding_id),
        grant_record_id(who.actor_id, spec.permission),
        executor_build_record_id(spec.capability, spec.executor_build),
    ]
    if spec.target is not None:
        ids.append(target_record_id(spec.target.id))
    return ids


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
) -> Authorization:
    """Check actor, bindings, permission, executor build and target; raise on failure.

    Without ``reads`` every record is read fresh from its stream."""
    if spec.expires_at <= now:
        raise AuthorizationFailed("spec_expired")
    if spec.permission not in ctx.permissions:
        raise AuthorizationFailed("permission_not_in_catalogue")
    source = reads or DirectoryReads(ctx, fresh=True)
    source.prefetch(directory_ids(who, spec))
    records: list[DirectorySnapshot] = []

    def need(stream_id: str) -> DirectorySnapshot:
        found = source.get(stream_id)
        if found is None:
            raise AuthorizationFailed("directory_record_missing")
        records.append(found)
        return found

    actor = need(actor_record_id(who.actor_id))
    identity = need(identity_binding_record_id(who.identity_binding_id))
    channel = need(channel_binding_record_id(who.channel_binding_id))
    grant = need(grant_record_id(who.actor_id, spec.permission))
    build = need(executor_build_record_id(spec.capability, spec.executor_build))
    if not actor.flag("enabled"):
        raise AuthorizationFailed("actor_disabled")
    if not identity.flag("active") or identity.text("actor_id") != who.actor_id:
        raise AuthorizationFailed("identity_binding")
    if (
        not channel.flag("active")
        or channel.text("conversation_key") != who.conversation_key
        or channel.text("channel") != identity.text("channel")
    ):
        raise AuthorizationFailed("channel_binding")
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
    absent: list[str] = []
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
    return Authorization(delivery_mode=build.text("delivery_mode"), records=records, absent=absent)
