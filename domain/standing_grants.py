"""Standing grants ("allow always"): an actor's approval given once, in advance,
for the proposals within its bounds (I14).

Each grant is its own directory record, ``standing-grant:<grant id>``, so
every change is an event of its stream: ``Registered`` when it is made,
``Changed`` when it is revoked. Its uses are counted where no single item
takes them all (docs/dynamodb.md, "No hot key"):

- **Use shards.** A grant made on a store that shards them (``use_shards`` on
  its record: the store's count, 256 by default, never more than its uses)
  splits ``max_uses`` into fixed quotas, one per shard
  (``standing-grant-uses:<grant id>:<n>``). A use appends ``Used`` to one
  shard, with that stream's version check, only while the shard is under its
  quota: two claims can never both take a shard's last use, and the quotas add
  up to ``max_uses``. Use number ``offset(n) + k`` is the k-th use of shard n,
  so every use has its own number in 1..``max_uses``. Each shard is a counter
  its claims read and then append to, so it takes one claim per round trip;
  hundreds of them let thousands of claims a second through one grant.
- **Fences.** Revoking such a grant appends ``Changed`` to its record and, in
  the same commit, makes all its fences (``fences`` on the record, at most
  ``MAX_FENCES``: ``standing-grant-fence:<grant id>:<n>``). Every use of shard
  s, and every dispatch marker of an attempt it approved, checks that fence
  ``s mod fences`` is still absent: nothing commits through a revoked grant,
  and no single item is checked by every use. The record itself never changes
  otherwise, so its cached copy is enough for the bounds.
- A grant made before use shards (no ``use_shards``) counts each use as a
  ``Used`` event of its own record, with the record's version check, as before.
  A grant with use shards records ``uses`` = ``max_uses`` on its record: the
  record itself gives no use, so a version that knows nothing of shards (one
  still running beside this one, or one rolled back to) reads it spent and
  never uses it; this version never reads that count.

An actor's index record, ``standing-grants:<actor id>``, lists its grants (a
proposal looks there for one that covers it).

A grant's bounds: the capability (exact), optionally the destination and the
effect (exact), conditions on the content fields (``domain.policy.content_fields``),
an expiry and a maximum number of uses. It approves a proposal only while it is
live: not revoked, not expired, uses below the maximum.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from domain.errors import InvalidInput, TooManyStandingGrants
from domain.policy import content_fields
from domain.spec import (
    MAX_SAFE_INT,
    NAME_PATTERN,
    ProposalSpec,
    UtcTimestamp,
    describe_validation_error,
    format_utc,
    nfc,
    parse_utc,
    plain_id,
)

MAX_LIVE_GRANTS = 16
"""Live grants one actor may hold (spent, expired and revoked ones are pruned first)."""
DEFAULT_USE_SHARDS = 256
MAX_USE_SHARDS = 1024
DEFAULT_FENCES = 32
MAX_FENCES = 47
"""A revocation is one commit: the record's event and head, a fence and its head
per fence, and three provenance checks: 2 x (1 + 47) + 3 = 99 of DynamoDB's
100 items."""
MAX_USES = 10_000
MAX_CONDITIONS = 8
MAX_IN_VALUES = 32
MAX_LIFETIME = timedelta(days=366)
GRANT_ID_PREFIX = "sgr"

Scalar = Annotated[str, BeforeValidator(nfc), Field(max_length=256)] | int | bool


class GrantState(StrEnum):
    """Where a standing grant stands, as of a moment."""

    ACTIVE = "active"
    SPENT = "spent"
    EXPIRED = "expired"
    REVOKED = "revoked"


class Condition(BaseModel):
    """``content[field] <op> value``: ``eq``/``ne`` any scalar (same type),
    ``lt``/``lte``/``gt``/``gte`` integers, ``in`` a list of scalars."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: Annotated[str, BeforeValidator(plain_id), Field(min_length=1, max_length=128)]
    op: Literal["eq", "ne", "lt", "lte", "gt", "gte", "in"]
    value: Scalar | Annotated[list[Scalar], Field(min_length=1, max_length=MAX_IN_VALUES)]

    @model_validator(mode="after")
    def _typed(self) -> Condition:
        if self.op == "in":
            if not isinstance(self.value, list):
                raise ValueError("op 'in' takes a list of values")
        elif isinstance(self.value, list):
            raise ValueError(f"op {self.op!r} takes one value")
        elif self.op in ("lt", "lte", "gt", "gte") and (
            isinstance(self.value, bool) or not isinstance(self.value, int)
        ):
            raise ValueError(f"op {self.op!r} compares integers")
        for item in self.value if isinstance(self.value, list) else [self.value]:
            if isinstance(item, int) and abs(item) > MAX_SAFE_INT:
                raise ValueError("integers must lie within +-(2**53 - 1)")
        return self


class GrantBounds(BaseModel):
    """What a new standing grant covers and for how long."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capability: Annotated[str, Field(pattern=NAME_PATTERN)]
    destination: (
        Annotated[str, BeforeValidator(plain_id), Field(min_length=1, max_length=256)] | None
    ) = None
    effect: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    conditions: Annotated[list[Condition], Field(max_length=MAX_CONDITIONS)] = Field(
        default_factory=list
    )
    expires_at: UtcTimestamp
    max_uses: Annotated[int, Field(ge=1, le=MAX_USES)]


def validate_bounds(data: Any, now: datetime) -> GrantBounds:
    """Untrusted bounds, validated; the expiry must be in the future, within a year."""
    try:
        bounds = GrantBounds.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(describe_validation_error(exc)) from exc
    if bounds.expires_at <= now:
        raise InvalidInput("expires_at: must be in the future")
    if bounds.expires_at > now + MAX_LIFETIME:
        raise InvalidInput("expires_at: at most 366 days from now")
    return bounds


def new_grant(
    grant_id: str,
    bounds: GrantBounds,
    granted_by: Mapping[str, Any],
    at: str,
    use_shards: int = 0,
) -> dict[str, Any]:
    """A grant as stored in the actor's record (JSON-ready); ``use_shards`` > 0: its
    uses are counted on that many shards (at most one per use)."""
    grant: dict[str, Any] = {
        "grant_id": grant_id,
        "capability": bounds.capability,
        "conditions": [c.model_dump(mode="json") for c in bounds.conditions],
        "expires_at": format_utc(bounds.expires_at),
        "max_uses": bounds.max_uses,
        "uses": 0,
        "revoked": False,
        "granted_by": dict(granted_by),
        "granted_at": at,
    }
    if bounds.destination is not None:
        grant["destination"] = bounds.destination
    if bounds.effect is not None:
        grant["effect"] = bounds.effect
    if use_shards > 0:
        grant["use_shards"] = min(use_shards, MAX_USE_SHARDS, bounds.max_uses)
        grant["fences"] = min(DEFAULT_FENCES, grant["use_shards"])
        grant["uses"] = bounds.max_uses  # none left on the record itself
    return grant


def is_sharded(grant: Mapping[str, Any]) -> bool:
    """Whether the grant counts its uses on use shards (else on its own record)."""
    return bool(grant.get("use_shards"))


def use_quotas(grant: Mapping[str, Any]) -> list[int]:
    """Each use shard's share of ``max_uses``: equal, the first ones one more."""
    count = int(grant["use_shards"])
    base, extra = divmod(int(grant["max_uses"]), count)
    return [base + (1 if n < extra else 0) for n in range(count)]


def use_number(grant: Mapping[str, Any], shard: int, slot: int) -> int:
    """The grant-wide number (1..max_uses) of the ``slot``-th use of ``shard``."""
    return sum(use_quotas(grant)[:shard]) + slot


def first_shard(grant: Mapping[str, Any], seed: str) -> int:
    """The use shard a claim tries first: spread by its own id (``seed``)."""
    digest = hashlib.sha256(f"{grant['grant_id']}/{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % int(grant["use_shards"])


def fence_count(grant: Mapping[str, Any]) -> int:
    return int(grant["fences"])


def fence_of(grant: Mapping[str, Any], shard: int) -> int:
    """The fence a use of ``shard`` (and a dispatch marker of what it approved) checks."""
    return shard % fence_count(grant)


def has_room(uses: int, quota: int) -> bool:
    """A shard gives a use only under its quota (the whole of I14's count)."""
    return uses < quota


def state_of(grant: Mapping[str, Any], now: datetime, uses: int | None = None) -> GrantState:
    """As of ``now``; ``uses``: the count summed over its use shards (without it, a
    grant with use shards is judged on revocation and expiry only: its record
    counts no use)."""
    if grant.get("revoked"):
        return GrantState.REVOKED
    if uses is None and not is_sharded(grant):
        uses = int(grant["uses"])
    if uses is not None and uses >= int(grant["max_uses"]):
        return GrantState.SPENT
    if parse_utc(grant["expires_at"]) <= now:
        return GrantState.EXPIRED
    return GrantState.ACTIVE


def _holds(condition: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    if condition["field"] not in fields:
        return False
    seen = fields[condition["field"]]
    wanted = condition["value"]
    op = condition["op"]
    if op == "in":
        return any(type(seen) is type(w) and seen == w for w in wanted)
    if op in ("eq", "ne"):
        same = type(seen) is type(wanted) and seen == wanted
        return same if op == "eq" else type(seen) is type(wanted) and not same
    if type(seen) is not int or type(wanted) is not int:
        return False
    if op == "lt":
        return bool(seen < wanted)
    if op == "lte":
        return bool(seen <= wanted)
    if op == "gt":
        return bool(seen > wanted)
    return bool(seen >= wanted)


def covers(grant: Mapping[str, Any], spec: ProposalSpec) -> bool:
    """The spec is within the grant's bounds (its state aside)."""
    if grant["capability"] != spec.capability:
        return False
    if grant.get("destination") not in (None, spec.destination):
        return False
    if grant.get("effect") not in (None, spec.effect):
        return False
    fields = content_fields(spec.content)
    return all(_holds(c, fields) for c in grant.get("conditions", ()))


def with_use(grant: Mapping[str, Any]) -> dict[str, Any]:
    """The grant's values with one more use counted."""
    return {**dict(grant), "uses": int(grant["uses"]) + 1}


def with_revoked(
    grant: Mapping[str, Any], revoked_by: Mapping[str, Any], at: str
) -> dict[str, Any] | None:
    """The grant's values revoked; None when it already is (nothing to append)."""
    if grant.get("revoked"):
        return None
    return {**dict(grant), "revoked": True, "revoked_by": dict(revoked_by), "revoked_at": at}


def index_with(
    index: Mapping[str, Any] | None,
    actor_id: str,
    grant_id: str,
    live: Callable[[str], bool],
) -> dict[str, Any]:
    """The actor's index with a new grant; grants no longer live (``live(id)``
    False: spent, expired, revoked) leave it first (their streams keep them).
    TooManyStandingGrants when the actor already holds the most live ones."""
    kept = [g for g in (index or {}).get("grant_ids", ()) if live(str(g))]
    if len(kept) >= MAX_LIVE_GRANTS:
        raise TooManyStandingGrants()
    return {"actor_id": actor_id, "grant_ids": [*kept, grant_id]}


def indexed_ids(index: Mapping[str, Any] | None) -> list[str]:
    return [str(g) for g in (index or {}).get("grant_ids", ())]


def shown(grant: Mapping[str, Any], now: datetime, uses: int) -> dict[str, Any]:
    """A grant as callers see it: its bounds, its ``uses`` (summed over its use
    shards, or as its record counts them) and its state as of ``now``."""
    return {**dict(grant), "uses": uses, "state": state_of(grant, now, uses).value}
