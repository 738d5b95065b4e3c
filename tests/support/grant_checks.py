"""I14 read back from the raw store: everything a standing grant's streams say
about its uses, checked against its bounds without the code that wrote them.

A grant with use shards: every shard's first event registers it with its quota
(the split ``domain.standing_grants.use_quotas`` gives), each ``Used`` counts
one more, never past the quota nor after the grant's expiry; no shard beyond
the grant's count has events; the uses add up to at most ``max_uses``; each
use is the claim of the proposal version it names, by this grant, shard and
use number; a revoked grant has every one of its fences, an unrevoked one none. A
grant without use shards: its own ``Used`` events, in its stream's order,
never past the maximum, the expiry or the revocation.
"""

from __future__ import annotations

from typing import Any

from adapters.store import LedgerStore
from domain.directory import (
    standing_grant_fence_id,
    standing_grant_record_id,
    standing_grant_uses_id,
)
from domain.proposal import Proposal
from domain.spec import parse_utc


def _events(store: LedgerStore, stream_id: str) -> list[Any]:
    return [store.mapper.to_domain_event(s) for s in store.read_stream(stream_id)]


def _kind(event: Any) -> str:
    return str(type(event).__qualname__.rsplit(".", 1)[-1])


def quotas_of(values: dict[str, Any]) -> list[int]:
    """The split of ``max_uses`` over ``use_shards``, worked out here again."""
    count, total = int(values["use_shards"]), int(values["max_uses"])
    return [total // count + (1 if n < total % count else 0) for n in range(count)]


def grant_uses(store: LedgerStore, grant_id: str) -> list[dict[str, Any]]:
    """Every recorded use of the grant: shard (None: on its record), the shard's
    use count after it, the proposal version and when."""
    record = _events(store, standing_grant_record_id(grant_id))
    values = dict(record[0].values) if record else {}
    if not values.get("use_shards"):
        return [
            {
                "shard": None,
                "uses": int(e.values["uses"]),
                "proposal_id": e.proposal_id,
                "version": e.version,
                "at": e.at,
            }
            for e in record
            if _kind(e) == "Used"
        ]
    found = []
    for shard in range(int(values["use_shards"])):
        for event in _events(store, standing_grant_uses_id(grant_id, shard)):
            if _kind(event) == "Used":
                found.append(
                    {
                        "shard": shard,
                        "uses": int(event.values["uses"]),
                        "proposal_id": event.proposal_id,
                        "version": event.version,
                        "at": event.at,
                    }
                )
    return found


def grant_violations(store: LedgerStore, grant_id: str) -> list[str]:
    """What the grant's streams break of I14 (empty: nothing)."""
    record = _events(store, standing_grant_record_id(grant_id))
    if not record:
        return [f"{grant_id}: no record"]
    registered = dict(record[0].values)
    final = dict(record[-1].values)
    expires = parse_utc(registered["expires_at"])
    maximum = int(registered["max_uses"])
    problems: list[str] = []
    if not registered.get("use_shards"):
        uses, revoked = 0, False
        for event in record[1:]:
            if _kind(event) == "Used":
                uses += 1
                if revoked:
                    problems.append(f"{grant_id}: used after its revocation")
                if uses > maximum:
                    problems.append(f"{grant_id}: use {uses} beyond its maximum of {maximum}")
                if parse_utc(event.at) >= expires:
                    problems.append(f"{grant_id}: used after its expiry")
                problems += _claimed_by(store, grant_id, None, uses, event)
            revoked = bool(event.values.get("revoked"))
        return problems
    quotas = quotas_of(registered)
    total = 0
    for shard, quota in enumerate(quotas):
        events = _events(store, standing_grant_uses_id(grant_id, shard))
        if not events:
            continue
        first = events[0]
        wanted = {"grant_id": grant_id, "shard": shard, "quota": quota, "uses": 0}
        if _kind(first) != "Registered" or dict(first.values) != wanted:
            problems.append(f"{grant_id}: shard {shard} registered as {dict(first.values)}")
        for slot, event in enumerate(events[1:], start=1):
            total += 1
            if _kind(event) != "Used" or int(event.values["uses"]) != slot:
                problems.append(f"{grant_id}: shard {shard} event {slot} is no count of one")
            if slot > quota:
                problems.append(f"{grant_id}: shard {shard} use {slot} beyond its quota of {quota}")
            if parse_utc(event.at) >= expires:
                problems.append(f"{grant_id}: used after its expiry")
            problems += _claimed_by(store, grant_id, shard, sum(quotas[:shard]) + slot, event)
    if store.read_stream(standing_grant_uses_id(grant_id, len(quotas))):
        problems.append(f"{grant_id}: a use on shard {len(quotas)}, which it does not have")
    if total > maximum:
        problems.append(f"{grant_id}: {total} uses beyond its maximum of {maximum}")
    fences = int(registered["fences"])
    fenced = [bool(store.read_stream(standing_grant_fence_id(grant_id, n))) for n in range(fences)]
    if store.read_stream(standing_grant_fence_id(grant_id, fences)):
        problems.append(f"{grant_id}: a fence {fences}, which it does not have")
    if final.get("revoked") and not all(fenced):
        missing = [n for n, f in enumerate(fenced) if not f]
        problems.append(f"{grant_id}: revoked without its fences {missing}")
    if not final.get("revoked") and any(fenced):
        problems.append(f"{grant_id}: fenced but not revoked")
    return problems


def _claimed_by(
    store: LedgerStore, grant_id: str, shard: int | None, number: int, event: Any
) -> list[str]:
    """The use is the claim of the proposal version it names, by this grant and use."""
    proposal = store.get(Proposal, event.proposal_id)
    record = proposal.versions.get(int(event.version)) if proposal else None
    approval = (record or {}).get("approval") or {}
    if (
        approval.get("grant_id") != grant_id
        or approval.get("use") != number
        or approval.get("shard") != shard
    ):
        return [
            f"{grant_id}: use {number} is not the claim of {event.proposal_id} v{event.version}"
        ]
    return []
