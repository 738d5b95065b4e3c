"""A standing grant's use shards and fences (``domain.standing_grants``): which
shard a claim takes its use from, the use itself, how many uses a grant has
given, and the fences its revocation makes.

A claim tries the shard its own id spreads it to; when that one has given its
quota it reads every shard's version at once (the head index: nothing for a
shard never used) and takes another with room. The use is appended to the
shard read from its stream, so its version check is what stops two claims from
both taking a shard's last use; a shard that filled up meanwhile makes the
claim decide again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.directory import (
    DirectoryKind,
    DirectoryRecord,
    standing_grant_fence_id,
    standing_grant_uses_id,
    validate_values,
)
from domain.errors import ConcurrencyConflict
from domain.services.context import ServiceContext
from domain.standing_grants import (
    fence_count,
    first_shard,
    has_room,
    is_sharded,
    use_number,
    use_quotas,
)
from domain.timeutil import format_utc


@dataclass(frozen=True)
class ShardPick:
    """The use shard a claim takes its use from, as read from its stream (None:
    never used; the first use registers it)."""

    shard: int
    record: DirectoryRecord | None


def shard_ids(grant: Mapping[str, Any]) -> list[str]:
    grant_id = str(grant["grant_id"])
    return [standing_grant_uses_id(grant_id, n) for n in range(len(use_quotas(grant)))]


def uses_at(version: int) -> int:
    """A shard's uses from its stream's version: its first use registers it in the
    same commit (``Registered``, then ``Used``), each later use is one event."""
    return max(0, version - 1)


def _uses(record: DirectoryRecord | None) -> int:
    return 0 if record is None else int(record.values["uses"])


def pick_shard(ctx: ServiceContext, grant: Mapping[str, Any], seed: str) -> ShardPick | None:
    """A shard with room, read from its stream; None when the grant is spent."""
    quotas = use_quotas(grant)
    ids = shard_ids(grant)
    first = first_shard(grant, seed)
    record = ctx.store.get(DirectoryRecord, ids[first])
    if has_room(_uses(record), quotas[first]):
        return ShardPick(first, record)
    versions = ctx.store.stream_versions(ids)
    open_shards = [
        n
        for n in range(len(quotas))
        if n != first and has_room(uses_at(versions.get(ids[n], 0)), quotas[n])
    ]
    if not open_shards:
        return None
    digest = hashlib.sha256(f"{seed}/again".encode()).digest()
    chosen = open_shards[int.from_bytes(digest[:8], "big") % len(open_shards)]
    return ShardPick(chosen, ctx.store.get(DirectoryRecord, ids[chosen]))


def take_use(
    grant: Mapping[str, Any],
    pick: ShardPick,
    *,
    proposal_id: str,
    version: int,
    now: datetime,
) -> tuple[DirectoryRecord, int]:
    """The shard with one more use (pending, committed with the claim) and the
    use's grant-wide number; ``ConcurrencyConflict`` when it has no room left."""
    quota = use_quotas(grant)[pick.shard]
    at = format_utc(now)
    record = pick.record
    if record is None:
        values = {"grant_id": grant["grant_id"], "shard": pick.shard, "quota": quota, "uses": 0}
        record = DirectoryRecord(
            record_id=standing_grant_uses_id(str(grant["grant_id"]), pick.shard),
            kind=DirectoryKind.STANDING_GRANT_USES.value,
            values=validate_values(DirectoryKind.STANDING_GRANT_USES, values),
            at=at,
        )
    uses = _uses(record)
    if not has_room(uses, quota):
        raise ConcurrencyConflict(record.id)  # filled up since it was picked: decide again
    record.record_use(
        {**record.values, "uses": uses + 1},
        grant_id=str(grant["grant_id"]),
        proposal_id=proposal_id,
        version=version,
        at=at,
    )
    return record, use_number(grant, pick.shard, uses + 1)


def uses_of(ctx: ServiceContext, grants: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each grant's uses: summed over its shards (one read of their versions for
    all the grants), or as its record counts them (a grant made before shards)."""
    sharded = [g for g in grants if is_sharded(g)]
    ids = [i for g in sharded for i in shard_ids(g)]
    versions = ctx.store.stream_versions(ids) if ids else {}
    return {
        str(g["grant_id"]): (
            sum(uses_at(versions.get(i, 0)) for i in shard_ids(g))
            if is_sharded(g)
            else int(g["uses"])
        )
        for g in grants
    }


def fenced(grant: Mapping[str, Any]) -> range:
    """The fences a revocation makes: every one the grant has."""
    return range(fence_count(grant))


def fences(grant: Mapping[str, Any], now: datetime) -> list[DirectoryRecord]:
    """The fences a revocation makes, in its own commit: from then on no use of any
    shard commits, nor a dispatch marker of an attempt the grant approved."""
    at = format_utc(now)
    return [
        DirectoryRecord(
            record_id=standing_grant_fence_id(str(grant["grant_id"]), n),
            kind=DirectoryKind.STANDING_GRANT_FENCE.value,
            values=validate_values(
                DirectoryKind.STANDING_GRANT_FENCE,
                {"grant_id": grant["grant_id"], "fence": n, "revoked_at": at},
            ),
            at=at,
        )
        for n in fenced(grant)
    ]
