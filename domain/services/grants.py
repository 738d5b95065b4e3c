"""Standing grants' use cases: make one, revoke one, read them (I14).

An actor makes a grant through its channel (the provenance an approval would
need: the actor enabled, the identity binding active and the actor's, the
channel binding active for the conversation on the same channel; and for a
channel service, both bindings on its channel), or an admin makes it for
them. Either is recorded on the grant (``granted_by``), and the commit that
records it checks the provenance records are unchanged. A grant made now gets
the store's use shards (``EventStore.grant_use_shards``). A grant is used only
by a claim (``automatic.py``); revoking it appends ``Changed`` with
``revoked`` (and, in the same commit, the fence of each of its use shards),
after which it approves nothing and an attempt it approved that has not been
dispatched yet fails safe (``standing_grant_revoked``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from domain.directory import (
    DirectoryKind,
    DirectoryRecord,
    actor_record_id,
    channel_binding_record_id,
    identity_binding_record_id,
    standing_grant_index_id,
    standing_grant_record_id,
    validate_values,
)
from domain.errors import ConcurrencyConflict, NotFound, StandingGrantRefused
from domain.ports import Commit, ReadCheck
from domain.services.authorization import Approver
from domain.services.context import ServiceContext
from domain.services.grant_shards import fences, uses_of
from domain.services.read_cache import commit, read_directory_latest
from domain.services.retry import retry_on_conflict
from domain.standing_grants import (
    GRANT_ID_PREFIX,
    GrantState,
    index_with,
    indexed_ids,
    is_sharded,
    new_grant,
    shown,
    state_of,
    validate_bounds,
    with_revoked,
)
from domain.timeutil import format_utc


@dataclass(frozen=True)
class Grantor:
    """Who makes or revokes a grant: the actor through its channel (``via`` =
    ``channel``, with its provenance and the service that asserted it), or an
    admin (``via`` = ``admin``)."""

    via: str
    subject: str
    provenance: Approver | None = None
    service_channel: str | None = None
    asserted_by: str | None = None

    def record(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"via": self.via, "subject": self.subject}
        if self.provenance is not None:
            shown["actor_id"] = self.provenance.actor_id
            shown["identity_binding_id"] = self.provenance.identity_binding_id
            shown["channel_binding_id"] = self.provenance.channel_binding_id
        if self.asserted_by is not None:
            shown["asserted_by"] = self.asserted_by
        return shown


def check_provenance(
    ctx: ServiceContext, who: Approver, service_channel: str | None
) -> list[ReadCheck]:
    """The actor's provenance, as an approval would need it, read fresh; the
    read checks of the records (StandingGrantRefused when it does not hold)."""
    records = {
        i: ctx.store.get(DirectoryRecord, i)
        for i in (
            actor_record_id(who.actor_id),
            identity_binding_record_id(who.identity_binding_id),
            channel_binding_record_id(who.channel_binding_id),
        )
    }
    actor, identity, channel = records.values()
    if (
        actor is None
        or identity is None
        or channel is None
        or not actor.flag("enabled")
        or not identity.flag("active")
        or identity.text("actor_id") != who.actor_id
        or not channel.flag("active")
        or channel.text("conversation_key") != who.conversation_key
        or channel.text("channel") != identity.text("channel")
        or (service_channel is not None and identity.text("channel") != service_channel)
    ):
        raise StandingGrantRefused()
    return [ReadCheck(i, r.version) for i, r in records.items() if r is not None]


def grant(ctx: ServiceContext, *, actor_id: str, bounds: Any, grantor: Grantor) -> dict[str, Any]:
    """Make a standing grant for ``actor_id``; returns it as shown (``state`` active)."""
    now = ctx.clock.now()
    checked = validate_bounds(bounds, now)
    read_set: list[ReadCheck] = []
    if grantor.provenance is not None:
        if grantor.provenance.actor_id != actor_id:
            raise StandingGrantRefused()
        read_set = check_provenance(ctx, grantor.provenance, grantor.service_channel)
    grant_id = ctx.tokens.new_id(GRANT_ID_PREFIX)
    at = format_utc(now)
    made = new_grant(grant_id, checked, grantor.record(), at, ctx.store.grant_use_shards())
    values = validate_values(DirectoryKind.STANDING_GRANT, {"actor_id": actor_id, **made})

    def once() -> dict[str, Any]:
        index_id = standing_grant_index_id(actor_id)
        index = ctx.store.get(DirectoryRecord, index_id)
        live = _live_ids(ctx, indexed_ids(index.values if index else None))
        index_values = validate_values(
            DirectoryKind.STANDING_GRANT_INDEX,
            index_with(index.values if index else None, actor_id, grant_id, live.__contains__),
        )
        if index is None:
            index = DirectoryRecord(
                record_id=index_id,
                kind=DirectoryKind.STANDING_GRANT_INDEX.value,
                values=index_values,
                at=at,
            )
        else:
            index.update(index_values, at=at)
        record = DirectoryRecord(
            record_id=standing_grant_record_id(grant_id),
            kind=DirectoryKind.STANDING_GRANT.value,
            values=values,
            at=at,
        )
        commit(ctx.store, ctx.cache, Commit(aggregates=[record, index], read_set=read_set))
        return shown(record.values, now, 0)

    return retry_on_conflict(once, exhausted=_contended(standing_grant_index_id(actor_id)))


def _live_ids(ctx: ServiceContext, grant_ids: Sequence[str]) -> set[str]:
    now = ctx.clock.now()
    found, _ = read_directory_latest(
        ctx.store, ctx.cache, [standing_grant_record_id(i) for i in grant_ids]
    )
    # revoked and expired ones first, without reading any use shard
    standing = [s.values for s in found.values() if state_of(s.values, now, 0) is GrantState.ACTIVE]
    uses = uses_of(ctx, standing)
    return {
        str(g["grant_id"])
        for g in standing
        if state_of(g, now, uses[str(g["grant_id"])]) is GrantState.ACTIVE
    }


def _contended(stream_id: str) -> Any:
    def contended() -> Any:
        raise ConcurrencyConflict(stream_id)

    return contended


def _grant_record(ctx: ServiceContext, grant_id: str, actor_id: str | None) -> DirectoryRecord:
    """The grant's record; NotFound when missing or (``actor_id``) another actor's."""
    record = ctx.store.get(DirectoryRecord, standing_grant_record_id(grant_id))
    if record is None or record.kind is not DirectoryKind.STANDING_GRANT:
        raise NotFound()
    if actor_id is not None and record.text("actor_id") != actor_id:
        raise NotFound()
    return record


def revoke(
    ctx: ServiceContext, *, grant_id: str, grantor: Grantor, actor_id: str | None = None
) -> dict[str, Any]:
    """Revoke a grant (``actor_id``: only if it is that actor's); a revoked one is
    answered as it is. From the commit on it approves nothing: a grant with use
    shards gets every shard's fence in the same commit, and every use and every
    dispatch marker of an attempt it approved checks its shard's fence."""
    _grant_record(ctx, grant_id, actor_id)  # another actor's grant: the missing answer first
    read_set: list[ReadCheck] = []
    if grantor.provenance is not None:
        read_set = check_provenance(ctx, grantor.provenance, grantor.service_channel)

    def once() -> dict[str, Any]:
        now = ctx.clock.now()
        record = _grant_record(ctx, grant_id, actor_id)
        revoked = with_revoked(record.values, grantor.record(), format_utc(now))
        if revoked is not None:
            record.update(
                validate_values(DirectoryKind.STANDING_GRANT, revoked), at=format_utc(now)
            )
            fenced = fences(record.values, now) if is_sharded(record.values) else []
            work = Commit(aggregates=[record, *fenced], read_set=read_set)
            commit(ctx.store, ctx.cache, work)
        return _shown(ctx, record.values, now)

    return retry_on_conflict(once, exhausted=_contended(standing_grant_record_id(grant_id)))


def _shown(ctx: ServiceContext, grant: dict[str, Any], now: Any) -> dict[str, Any]:
    return shown(grant, now, uses_of(ctx, [grant])[str(grant["grant_id"])])


def get(ctx: ServiceContext, grant_id: str, actor_id: str | None = None) -> dict[str, Any]:
    """One grant as shown (NotFound when missing, or another actor's): its uses
    summed over its use shards."""
    return _shown(ctx, _grant_record(ctx, grant_id, actor_id).values, ctx.clock.now())


def list_grants(ctx: ServiceContext, actor_id: str) -> list[dict[str, Any]]:
    """The actor's grants (live ones, and retired ones not yet pruned), oldest first."""
    now = ctx.clock.now()
    index = ctx.store.get(DirectoryRecord, standing_grant_index_id(actor_id))
    ids = indexed_ids(index.values if index else None)
    records = [ctx.store.get(DirectoryRecord, standing_grant_record_id(i)) for i in ids]
    grants = [r.values for r in records if r is not None]
    uses = uses_of(ctx, grants)
    return [shown(g, now, uses[str(g["grant_id"])]) for g in grants]
