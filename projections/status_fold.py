"""How each event changes the status view: the one fold every status row comes from.

``CHANGES`` says, per event type of ``ExecutionAttempt``, which arguments the
event must carry and how it changes the view's fields
(``projections.status.VIEW_FIELDS``). It is applied to decoded event data
(plain dicts), never to the aggregate, by both producers of a row:

- the live projector (``projections.projector``) reads the stream's events
  and folds their data (``read_status``);
- the rebuild (``adapters.rebuild``) folds the data decoded straight from the
  canonical stored bytes (``fold_status``), and a stream whose bytes it cannot
  take that way (the library's older form, a state moved between rows) the
  way the live projector does.

The aggregate keeps its own transitions for the domain's decisions; the fold
is held to them by ``tests/unit/test_status_fold.py``, which folds random
histories both ways and compares the rows byte for byte.

It is total over the histories the aggregate replays, and refuses what the
aggregate refuses: an event type it does not know after the first, a missing
argument, a status or delivery mode outside their enums, an ``authorized``
list that is not [stream, version] pairs, a version out of sequence all raise
``UnreadableHistory`` naming the stream, the version and what is wrong (never
a stored value). A stream that does not begin with an attempt's ``Queued`` is
not an attempt stream: the fold answers None for it, as loading it as an
``ExecutionAttempt`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eventsourcing.utils import get_topic

from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.base import LedgerEvent
from domain.directory import DeliveryMode
from domain.ports import EventStore
from projections.ports import ViewRecord
from projections.status import (
    SHOWN_WHEN_SET,
    VIEW_FIELDS,
    shown_resolution,
    shown_result,
    status_row,
)


class UnreadableHistory(ValueError):
    """An attempt stream the status view cannot be folded from (a stored event
    that does not decode, is unknown, lacks an argument or holds a value outside
    its enum): the message names the stream, the version and what is wrong."""


class _Refused(Exception):
    """A value an event holds that the aggregate would refuse (the reason, no value)."""


Fields = dict[str, Any]
"""A value for every field of the view, plus ``owner_actor_id``."""


@dataclass(frozen=True)
class Change:
    """How one event type changes the view: the arguments it must carry (those
    its aggregate method takes without a default) and the change itself."""

    required: frozenset[str]
    apply: Callable[[Fields, Mapping[str, Any]], None]


# ``Enum(value).value`` by the value map: the same text or a KeyError, at a tenth of the cost.
_STATUSES: dict[Any, str] = {m.value: m.value for m in AttemptStatus}
_MODES: dict[Any, str] = {m.value: m.value for m in DeliveryMode}
QUEUED, EXECUTING, EFFECT_AFTER_NO_EFFECT, MANUALLY_RESOLVED = (
    AttemptStatus.QUEUED.value,
    AttemptStatus.EXECUTING.value,
    AttemptStatus.EFFECT_AFTER_NO_EFFECT.value,
    AttemptStatus.MANUALLY_RESOLVED.value,
)


def _known(values: dict[Any, str], value: Any, what: str) -> str:
    try:
        return values[value]
    except (KeyError, TypeError):
        raise _Refused(f"its {what} is not one the ledger knows") from None


def _queued(fields: Fields, data: Mapping[str, Any]) -> None:
    authorized = data.get("authorized")
    if authorized is not None:  # the aggregate keeps [(str(i), int(v))]:
        try:  # it fails where this does (str() never)
            for _, v in authorized:
                int(v)
        except (TypeError, ValueError):
            raise _Refused("its authorized list is not [stream, version] pairs") from None
    fields["delivery_mode"] = _known(_MODES, data["delivery_mode"], "delivery mode")
    fields["proposal_id"] = data["proposal_id"]
    fields["proposal_version"] = data["proposal_version"]
    fields["owner_actor_id"] = data["actor_id"]
    fields["created_at"] = fields["updated_at"] = data["at"]
    approval = data.get("approval")
    if approval is not None:
        if not isinstance(approval, Mapping) or not isinstance(approval.get("kind"), str):
            raise _Refused("its approval is not an approval")
        fields["approval"] = dict(approval)


def _leased(fields: Fields, data: Mapping[str, Any]) -> None:
    fields["status"] = EXECUTING
    fields["lease_generation"] = data["generation"]
    fields["updated_at"] = data["at"]


def _requeued(fields: Fields, data: Mapping[str, Any]) -> None:
    fields["status"] = QUEUED
    fields["updated_at"] = data["at"]


def _dispatch_started(fields: Fields, data: Mapping[str, Any]) -> None:
    fields["dispatch_started_at"] = fields["updated_at"] = data["at"]


def _result_recorded(fields: Fields, data: Mapping[str, Any]) -> None:
    kind = _known(_STATUSES, data["status"], "status")
    try:
        fields["result"] = shown_result(kind, data["reason_code"], data["receipt"])
    except (TypeError, ValueError):
        raise _Refused("its receipt is not an object") from None
    fields["status"] = kind
    fields["updated_at"] = data["at"]


def _effect_after_no_effect(fields: Fields, data: Mapping[str, Any]) -> None:
    fields["status"] = EFFECT_AFTER_NO_EFFECT
    fields["updated_at"] = data["at"]


def _late_result_observed(fields: Fields, data: Mapping[str, Any]) -> None:
    """Kept for the record; nothing the view shows changes."""


def _possibly_dispatched(fields: Fields, data: Mapping[str, Any]) -> None:
    """A restore found the attempt unsettled: it is settled as a dispatched one is
    (I17). Its dispatch time stays what the log shows (none, if it never was)."""
    fields["status"] = EXECUTING
    fields["updated_at"] = data["at"]


def _looked_again(fields: Fields, data: Mapping[str, Any]) -> None:
    """The watch of a "no effect" looked and did not find the effect: kept for the
    record (the audit timeline shows each look); nothing the view shows changes."""


def _manually_resolved(fields: Fields, data: Mapping[str, Any]) -> None:
    fields["status"] = MANUALLY_RESOLVED
    fields["resolution"] = shown_resolution(
        data["outcome"], data["reason"], data["resolved_by"], data["at"]
    )
    fields["updated_at"] = data["at"]


def _acknowledged(fields: Fields, data: Mapping[str, Any]) -> None:
    fields["acknowledgement"] = {
        "acknowledged_by": data["acknowledged_by"],
        "note": data["note"],
        "at": data["at"],
    }
    fields["updated_at"] = data["at"]


def _change(apply: Callable[[Fields, Mapping[str, Any]], None], *required: str) -> Change:
    return Change(frozenset(required), apply)


QUEUED_EVENT = "Queued"
CHANGES: dict[str, Change] = {
    QUEUED_EVENT: _change(
        _queued,
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
    ),
    "Leased": _change(_leased, "owner", "generation", "expires_at", "executor_build", "at"),
    "Requeued": _change(_requeued, "generation", "reason", "not_before", "at"),
    "DispatchStarted": _change(_dispatch_started, "generation", "at"),
    "ResultRecorded": _change(
        _result_recorded, "generation", "status", "reason_code", "receipt", "source", "at"
    ),
    "EffectAfterNoEffect": _change(
        _effect_after_no_effect, "generation", "previous", "source", "at"
    ),
    "LateResultObserved": _change(_late_result_observed, "generation", "kind", "at"),
    "LookedAgain": _change(_looked_again, "step", "verdict", "at"),
    "PossiblyDispatched": _change(
        _possibly_dispatched, "restore_id", "lease_expires_at", "settles_at", "at"
    ),
    "ManuallyResolved": _change(
        _manually_resolved, "outcome", "reason", "resolved_by", "receipt", "at"
    ),
    "Acknowledged": _change(_acknowledged, "acknowledged_by", "note", "at"),
}
"""Event name -> how it changes the view (every event of ``ExecutionAttempt``)."""

REQUIRED: dict[str, frozenset[str]] = {name: change.required for name, change in CHANGES.items()}
"""Per event the arguments its method takes without a default."""

ATTEMPT_TOPIC = get_topic(ExecutionAttempt)
EVENT_TYPES: dict[str, str] = {
    get_topic(getattr(ExecutionAttempt, name)): f"ExecutionAttempt.{name}" for name in CHANGES
}
"""Stored topic -> the event type its body names, for every event of the attempt."""
_BY_TYPE: dict[str, tuple[str, frozenset[str], Callable[[Fields, Mapping[str, Any]], None]]] = {
    f"ExecutionAttempt.{name}": (name, change.required, change.apply)
    for name, change in CHANGES.items()
}
_TYPE_OF_CLASS: dict[type, str] = {
    getattr(ExecutionAttempt, name): f"ExecutionAttempt.{name}" for name in CHANGES
}


_START: Fields = dict.fromkeys(VIEW_FIELDS) | {
    "status": QUEUED,
    "lease_generation": 0,
    "owner_actor_id": None,
}


def fold_fields(
    stream_id: str,
    events: Iterable[tuple[str, Mapping[str, Any]]],
    after_each: Callable[[Fields], None] | None = None,
) -> Fields | None:
    """The view's fields once every event of ``stream_id`` is applied (its
    events' type and data in version order from version 1); ``after_each`` is
    called with them after each event (one dict, updated in place: copy what is
    kept). None for a stream that is not an attempt's; ``UnreadableHistory``
    for one the aggregate cannot replay."""
    fields = _START.copy()
    fields["attempt_id"] = stream_id
    version = 0
    for version, (event_type, data) in enumerate(events, 1):
        known = _BY_TYPE.get(event_type)
        if known is None:
            if version == 1:
                return None  # another aggregate's stream
            raise UnreadableHistory(
                f"{stream_id} version {version}: {event_type} is not an event of an attempt"
            )
        name, required, apply = known
        if version == 1:
            if name != QUEUED_EVENT:
                raise UnreadableHistory(f"{stream_id} version 1: the stream begins with {name}")
        elif name == QUEUED_EVENT:
            raise UnreadableHistory(f"{stream_id} version {version}: a second {name}")
        if not required <= data.keys():
            missing = ", ".join(sorted(required - data.keys()))
            raise UnreadableHistory(f"{stream_id} version {version}: {name} lacks {missing}")
        if version == 1 and data["originator_topic"] != ATTEMPT_TOPIC:
            return None  # the stream creates another aggregate
        try:
            apply(fields, data)
        except _Refused as exc:
            raise UnreadableHistory(f"{stream_id} version {version}: {name}: {exc}") from None
        if after_each is not None:
            fields["revision"] = version
            after_each(fields)
    if version == 0:
        return None
    fields["revision"] = version
    return fields


def row_of(fields: Fields, chain_head: str) -> ViewRecord:
    """The stored row of folded fields (taken over: not to be folded further);
    ``chain_head`` is the hash of the newest event."""
    for name in SHOWN_WHEN_SET:  # the view of the fields, in place (``view_of``)
        if fields[name] is None:
            del fields[name]
    return status_row(
        fields,
        version=fields["revision"],
        owner_actor_id=fields["owner_actor_id"],
        chain_head=chain_head,
    )


def fold_status(
    stream_id: str, events: Iterable[tuple[str, Mapping[str, Any]]], chain_head: str
) -> ViewRecord | None:
    """The status row of ``stream_id`` from its events' (type, data) in version
    order from version 1, and the hash of the last one; None when it is not an
    attempt stream (``fold_fields``)."""
    fields = fold_fields(stream_id, events)
    return None if fields is None else row_of(fields, chain_head)


def typed(stream_id: str, events: Iterable[LedgerEvent]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(type, data) of decoded events, checked to follow each other from version 1."""
    for expected, event in enumerate(events, 1):
        if event.originator_version != expected:
            raise UnreadableHistory(
                f"{stream_id} version {expected}: the stream has version "
                f"{event.originator_version} there"
            )
        cls = type(event)
        yield _TYPE_OF_CLASS.get(cls) or get_topic(cls), event.data()


def fold_events(stream_id: str, events: Sequence[LedgerEvent]) -> ViewRecord | None:
    """The status row of decoded events (a whole stream, in version order)."""
    fields = fold_fields(stream_id, typed(stream_id, events))
    return None if fields is None else row_of(fields, events[-1].hash())


def read_status(store: EventStore, stream_id: str) -> ViewRecord | None:
    """The status row of an attempt stream as stored now; None when the stream
    is empty or not an attempt's. How the live projector makes every row."""
    events, bad = store.audit_events(stream_id)
    if bad is not None:
        raise UnreadableHistory(f"{stream_id} version {bad}: the stored event does not decode")
    return fold_events(stream_id, events)
