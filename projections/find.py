"""The find index of attempts: what the console's search and attention list read.

Every attempt has, beside its status row, a few small index rows in the
``attempt_find`` view, one per way of finding it, each in its own list of the
view store (a range read of one list: never a scan of the table):

- ``find#all``, ``find#status#<status>``, ``find#capability#<capability>``,
  ``find#actor#<actor id>``: newest first (the sort key is the creation time
  inverted, so the store's ascending order is newest first, and a time range
  is a range of keys);
- ``find#id`` (by attempt id) and ``find#proposal`` (by proposal id): an id
  prefix is a range of keys;
- ``attention#<reason>``: what waits for a human, oldest change first:
  ``outcome_unknown``, ``effect_after_no_effect`` and a ``failed_safe`` no
  admin has acknowledged yet (an acknowledged one has no list).

Each row carries the public status view and what the attempt was (capability,
destination, target, actor, bindings, permission, build: ``FACTS``), never its
content or idempotency key (I10). The rows are folded with the status row, at
its version, and written with it in one atomic write, so they move together
under the same version guard.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from domain.attempt import AttemptStatus
from domain.ports import EventStore
from domain.redaction import redact
from domain.timeutil import parse_utc
from projections.ports import ViewRecord
from projections.status import public_view
from projections.status_fold import UnreadableHistory, fold_events

FIND_VIEW = "attempt_find"
FACTS = (
    "capability",
    "executor_build",
    "actor_id",
    "identity_binding_id",
    "channel_binding_id",
    "permission",
    "target_id",
    "target_revision",
)
"""What the Queued event says the attempt was (never content or the key)."""
ATTENTION_STATUSES = (
    AttemptStatus.OUTCOME_UNKNOWN.value,
    AttemptStatus.EFFECT_AFTER_NO_EFFECT.value,
    AttemptStatus.FAILED_SAFE.value,
)
_MAX_MICROS = 10**17
ID_END = "\U0010ffff"


def newest_first_key(moment: datetime) -> str:
    """A sort key that orders later moments first (fixed width)."""
    micros = int(moment.timestamp() * 1_000_000)
    return f"{_MAX_MICROS - micros:017d}"


def attention_of(data: Mapping[str, Any]) -> str | None:
    """The attention list an attempt is on, if any."""
    status = data.get("status")
    if status not in ATTENTION_STATUSES:
        return None
    if status == AttemptStatus.FAILED_SAFE.value and data.get("acknowledgement"):
        return None
    return str(status)


def facts_of(queued: Mapping[str, Any]) -> dict[str, Any]:
    """What the attempt was, from its Queued event's data, every secret-shaped
    value redacted (a destination may be a URL with a credential in it)."""
    facts = {name: queued.get(name) for name in FACTS}
    spec = queued.get("spec")
    if isinstance(spec, Mapping):
        facts["destination"] = spec.get("destination")
        facts["effect"] = spec.get("effect")
    redacted: dict[str, Any] = redact(facts)
    return redacted


def find_rows(status: ViewRecord, facts: Mapping[str, Any]) -> list[ViewRecord]:
    """The index rows of one attempt, at its status row's version."""
    data = {**public_view(status.data), **facts}
    data["owner_actor_id"] = status.data.get("owner_actor_id")
    attempt_id = status.key
    newest = newest_first_key(parse_utc(str(data["created_at"]))) + "#" + attempt_id
    reason = attention_of(data)
    lists: list[tuple[str, str | None, str | None]] = [
        ("all", "find#all", newest),
        ("status", f"find#status#{data['status']}", newest),
        ("capability", f"find#capability#{facts.get('capability')}", newest),
        ("actor", f"find#actor#{facts.get('actor_id')}", newest),
        ("id", "find#id", attempt_id),
        ("proposal", "find#proposal", f"{data['proposal_id']}#{attempt_id}"),
        (
            "attention",
            None if reason is None else f"attention#{reason}",
            None if reason is None else f"{data['updated_at']}#{attempt_id}",
        ),
    ]
    return [
        ViewRecord(
            name=FIND_VIEW,
            key=f"{attempt_id}#{dim}",
            version=status.version,
            data=data,
            list_pk=pk,
            list_sk=sk,
        )
        for dim, pk, sk in lists
    ]


def read_rows(store: EventStore, stream_id: str) -> list[ViewRecord]:
    """The status row of an attempt stream and its index rows (status row first);
    empty when the stream is empty or not an attempt's."""
    events, bad = store.audit_events(stream_id)
    if bad is not None:
        raise UnreadableHistory(f"{stream_id} version {bad}: the stored event does not decode")
    record = fold_events(stream_id, events)
    if record is None:
        return []
    return [record, *find_rows(record, facts_of(events[0].data()))]
