"""Schemas of the execution-attempt routes.

The status view's fields and types are defined once, with the view itself
(``projections.status.AttemptStatusView``); ``AttemptOut`` is that model
under the name the API has always published.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from projections.status import AttemptResolution, AttemptResult, AttemptStatusView

__all__ = [
    "AttemptEventsOut",
    "AttemptListOut",
    "AttemptOut",
    "AttemptResolution",
    "AttemptResult",
    "AuditEvent",
    "ReconcileIn",
    "ResolveIn",
]


class AttemptOut(AttemptStatusView):
    """The redacted status view of an attempt."""


class ReconcileIn(BaseModel):
    """Run the attempt's registered read-only reconciler; no provider result accepted."""

    model_config = ConfigDict(extra="forbid")

    expected_revision: Annotated[int, Field(ge=1, le=1_000_000)]


SafeValue = (
    Annotated[str, Field(max_length=256)]
    | Annotated[int, Field(ge=-(2**53 - 1), le=2**53 - 1)]
    | bool
)


class ResolveIn(BaseModel):
    """Settle ``outcome_unknown`` with an admin verdict and a reason."""

    model_config = ConfigDict(extra="forbid")

    expected_revision: Annotated[int, Field(ge=1, le=1_000_000)]
    resolution: Literal["effect_applied", "no_effect"]
    reason: Annotated[str, Field(min_length=1, max_length=500)]
    receipt: Annotated[dict[str, SafeValue], Field(max_length=16)] | None = None


class AttemptListOut(BaseModel):
    """One page of attempts and the cursor of the next (None at the end)."""

    items: list[AttemptOut]
    next_cursor: str | None = None


class AuditEvent(BaseModel):
    """One event of the redacted audit timeline."""

    version: int
    type: str
    recorded_at: str
    data: dict[str, Any]


class AttemptEventsOut(BaseModel):
    """The redacted timeline and whether its hash chain verified."""

    events: list[AuditEvent]
    verified: bool
    first_bad_version: int | None = None
