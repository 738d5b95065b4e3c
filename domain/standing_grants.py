"""Standing grants ("allow always"): an actor's approval given once, in advance,
for the proposals within its bounds (I14).

Each grant is its own directory record, ``standing-grant:<grant id>``, so
every change is an event of its stream: ``Registered`` when it is made,
``Changed`` when it is revoked, ``Used`` when it approves a proposal. A use is
appended in the claim's own commit, with the stream's version check, so two
claims can never both take the last use: the loser conflicts, reads again and
finds the grant spent (design.md 5.2). The stream is at most ``max_uses`` + 2
events long. An actor's index record, ``standing-grants:<actor id>``, lists
its grants (a proposal looks there for one that covers it).

A grant's bounds: the capability (exact), optionally the destination and the
effect (exact), conditions on the content fields (``domain.policy.content_fields``),
an expiry and a maximum number of uses. It approves a proposal only while it is
live: not revoked, not expired, uses below the maximum.
"""

from __future__ import annotations

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
    grant_id: str, bounds: GrantBounds, granted_by: Mapping[str, Any], at: str
) -> dict[str, Any]:
    """A grant as stored in the actor's record (JSON-ready)."""
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
    return grant


def state_of(grant: Mapping[str, Any], now: datetime) -> GrantState:
    if grant.get("revoked"):
        return GrantState.REVOKED
    if int(grant["uses"]) >= int(grant["max_uses"]):
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


def shown(grant: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """A grant as callers see it: its bounds, counts and state as of ``now``."""
    return {**dict(grant), "state": state_of(grant, now).value}
