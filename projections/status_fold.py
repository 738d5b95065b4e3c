"""The status row folded straight from an attempt's decoded event data.

A rebuild needs the row, not the aggregate: folding through
``ExecutionAttempt`` builds an event object per stored event and runs the
library's generic mutate (signature filtering, keyword calls) for ~30 fields
the row never shows. This fold reads only what ``status_record`` reads, from
the same data, in the same order; it is the aggregate's transitions written
once more for the row's fields, so it is held to them by test
(``tests/unit/test_status_fold.py`` folds random histories both ways and
compares the rows byte for byte).

It answers only for what it knows: an event type it does not name, a missing
argument, a value the aggregate would refuse (an unknown status or delivery
mode, an ``authorized`` list it cannot read) makes it answer None, and the
caller folds that stream through the aggregate, whose answer (a row or an
error) is then the one given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eventsourcing.utils import get_topic

from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.directory import DeliveryMode
from projections.ports import ViewRecord
from projections.status import status_row, status_view

REQUIRED: dict[str, frozenset[str]] = {
    "Queued": frozenset(
        {
            "originator_topic",
            "attempt_id",
            "proposal_id",
            "proposal_version",
            "payload_hash",
            "view_hash",
            "idempotency_key",
            "capability",
            "executor_build",
            "delivery_mode",
            "actor_id",
            "identity_binding_id",
            "channel_binding_id",
            "conversation_key",
            "permission",
            "target_id",
            "target_revision",
            "at",
        }
    ),
    "Leased": frozenset({"owner", "generation", "expires_at", "executor_build", "at"}),
    "Requeued": frozenset({"generation", "reason", "not_before", "at"}),
    "DispatchStarted": frozenset({"generation", "at"}),
    "ResultRecorded": frozenset({"generation", "status", "reason_code", "receipt", "source", "at"}),
    "EffectAfterNoEffect": frozenset({"generation", "previous", "source", "at"}),
    "LateResultObserved": frozenset({"generation", "kind", "at"}),
    "ManuallyResolved": frozenset({"outcome", "reason", "resolved_by", "receipt", "at"}),
}
"""Per event the arguments its method takes without a default (the aggregate
raises without them; so the fold declines)."""

ATTEMPT_TOPIC = get_topic(ExecutionAttempt)
EVENT_TYPES: dict[str, str] = {
    get_topic(getattr(ExecutionAttempt, name)): f"ExecutionAttempt.{name}" for name in REQUIRED
}
"""Stored topic -> the event type its body names, for the events this fold knows."""
_NAMES = {f"ExecutionAttempt.{name}": name for name in REQUIRED}
# ``Enum(value).value`` by the value map: the same text or a KeyError, at a tenth of the cost.
_STATUSES: dict[Any, str] = {m.value: m.value for m in AttemptStatus}
_MODES: dict[Any, str] = {m.value: m.value for m in DeliveryMode}
QUEUED, EXECUTING, EFFECT_AFTER_NO_EFFECT, MANUALLY_RESOLVED = (
    AttemptStatus.QUEUED.value,
    AttemptStatus.EXECUTING.value,
    AttemptStatus.EFFECT_AFTER_NO_EFFECT.value,
    AttemptStatus.MANUALLY_RESOLVED.value,
)


def fold_status(
    stream_id: str, events: Iterable[tuple[str, dict[str, Any]]], chain_head: str
) -> ViewRecord | None:
    """The status row of ``stream_id`` from its events' (type, data) in version
    order from version 1, and the hash of the last one; None when an event is
    outside what this fold knows (fold through the aggregate instead)."""
    version = 0
    status = QUEUED
    proposal_id: Any = None
    proposal_version: Any = None
    actor_id: Any = None
    delivery_mode: str | None = None
    created_at: Any = None
    updated_at: Any = None
    lease_generation: Any = 0
    dispatch_started_at: Any = None
    result: dict[str, Any] | None = None
    resolution: dict[str, Any] | None = None
    for event_type, data in events:
        name = _NAMES.get(event_type)
        if name is None or not REQUIRED[name] <= data.keys():
            return None
        version += 1
        if (version == 1) != (name == "Queued"):
            return None
        try:
            if name == "Queued":
                if data["originator_topic"] != ATTEMPT_TOPIC:
                    return None
                authorized = data.get("authorized")
                if authorized is not None:  # the aggregate keeps [(str(i), int(v))]:
                    for _, v in authorized:  # it fails where this does (str() never)
                        int(v)
                delivery_mode = _MODES[data["delivery_mode"]]
                proposal_id, proposal_version = data["proposal_id"], data["proposal_version"]
                actor_id = data["actor_id"]
                created_at = updated_at = data["at"]
            elif name == "Leased":
                status = EXECUTING
                lease_generation = data["generation"]
                updated_at = data["at"]
            elif name == "Requeued":
                status = QUEUED
                updated_at = data["at"]
            elif name == "DispatchStarted":
                dispatch_started_at = updated_at = data["at"]
            elif name == "ResultRecorded":
                kind = data["status"]
                status = _STATUSES[kind]
                result = {"kind": kind, "source": data["source"]}
                if data["reason_code"] is not None:
                    result["reason_code"] = data["reason_code"]
                if data["receipt"] is not None:
                    result["receipt"] = data["receipt"]
                updated_at = data["at"]
            elif name == "EffectAfterNoEffect":
                status = EFFECT_AFTER_NO_EFFECT
                updated_at = data["at"]
            elif name == "ManuallyResolved":
                status = MANUALLY_RESOLVED
                resolution = {
                    "outcome": data["outcome"],
                    "reason": data["reason"],
                    "resolved_by": data["resolved_by"],
                    "resolved_at": data["at"],
                }
                updated_at = data["at"]
            # LateResultObserved changes nothing the row shows
        except Exception:  # the aggregate's own fold gives its own answer to it
            return None
    if version == 0:
        return None
    assert delivery_mode is not None
    try:  # a value status_view cannot show (a receipt that is not an object)
        view = status_view(
            attempt_id=stream_id,
            proposal_id=proposal_id,
            proposal_version=proposal_version,
            status=status,
            revision=version,
            delivery_mode=delivery_mode,
            created_at=created_at,
            updated_at=updated_at,
            lease_generation=lease_generation,
            dispatch_started_at=dispatch_started_at,
            result=result,
            resolution=resolution,
        )
    except Exception:
        return None
    return status_row(view, version=version, owner_actor_id=actor_id, chain_head=chain_head)
