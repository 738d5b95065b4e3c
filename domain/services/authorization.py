"""The I7 authorization check, shared by approval and the pre-dispatch recheck.

Reads every directory record the decision depends on, from exact stored ids,
and returns them so the caller can condition-check in its commit that none
changed in between.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from domain.directory import (
    DirectoryRecord,
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    target_record_id,
)
from domain.ports import ReadCheck
from domain.services.context import ServiceContext
from domain.spec import ProposalSpec


class AuthorizationFailed(Exception):
    """Some part of I7 does not hold; ``reason`` is a bounded, redacted code."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class TargetDrift(Exception):
    """The tracked target's revision is not the spec's base revision."""

    def __init__(self, target: DirectoryRecord) -> None:
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
    records: list[DirectoryRecord] = field(default_factory=list)

    @property
    def read_set(self) -> list[ReadCheck]:
        return [ReadCheck(r.id, r.version) for r in self.records]


def authorize(
    ctx: ServiceContext, who: Approver, spec: ProposalSpec, now: datetime
) -> Authorization:
    """Check actor, bindings, permission, executor build and target; raise on failure."""
    if spec.expires_at <= now:
        raise AuthorizationFailed("spec_expired")
    if spec.permission not in ctx.permissions:
        raise AuthorizationFailed("permission_not_in_catalogue")
    records: list[DirectoryRecord] = []

    def need(stream_id: str) -> DirectoryRecord:
        found = ctx.store.get(DirectoryRecord, stream_id)
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
    if ctx.registry is not None:
        executor = ctx.registry.get(spec.capability, spec.executor_build)
        if executor is None:
            raise AuthorizationFailed("executor_not_registered")
        if executor.delivery_mode.value != build.text("delivery_mode"):
            raise AuthorizationFailed("delivery_mode_mismatch")
    if spec.target is not None:
        target = ctx.store.get(DirectoryRecord, target_record_id(spec.target.id))
        if target is not None:
            if target.text("revision") != spec.target.base_revision:
                raise TargetDrift(target)
            records.append(target)
    return Authorization(delivery_mode=build.text("delivery_mode"), records=records)
