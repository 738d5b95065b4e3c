"""The audit view: a redacted, replayable timeline of one stream, and a picture.

Events are labelled, in the diagram as in the console's picture, by the one
table of their words (``projections.labels``).

Redaction (I10): proposal content, tokens and their hashes, idempotency keys
and anything secret-shaped never leave; everything else (ids, states, reason
codes, digests, validated receipts, timestamps) is shown as recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.attempt import RESOLVABLE, TERMINAL
from domain.audit import verify_chain
from domain.base import LedgerEvent
from domain.directory import (
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    target_record_id,
)
from domain.ports import EventStore
from domain.redaction import redact
from domain.spec import format_utc
from projections.labels import OBSERVATION_EVENTS, STATE_AFTER, event_label, state_after
from projections.ports import ViewStore
from projections.status import STATUS_VIEW

# Event fields whose values never leave the store: proposal content, tokens and
# their hashes, idempotency keys and lease owners.
REDACTED_KEYS = frozenset({"content", "token", "token_hash", "idempotency_key", "owner"})
HIDDEN_KEYS = frozenset({"prev_hash", "originator_topic", "trace_context"})


def event_type(event: LedgerEvent) -> str:
    """``Queued``, ``Leased``... (the event class name without its aggregate)."""
    return type(event).__qualname__.rsplit(".", 1)[-1]


def timeline(events: Sequence[LedgerEvent]) -> list[dict[str, Any]]:
    """``[{"version", "type", "recorded_at", "data"}]`` with redacted data."""
    rows = []
    for event in events:
        data = {k: v for k, v in event.data().items() if k not in HIDDEN_KEYS}
        rows.append(
            {
                "version": event.originator_version,
                "type": event_type(event),
                "recorded_at": format_utc(event.timestamp),
                "data": redact(data, REDACTED_KEYS),
            }
        )
    return rows


STATE_BY_TYPE = STATE_AFTER
"""The state each attempt event leads to (``projections.labels.STATE_AFTER``)."""
SETTLED = frozenset(s.value for s in TERMINAL - RESOLVABLE)
"""States the diagram ends in: terminal and waiting for no one."""


def mermaid_state_diagram(rows: Sequence[dict[str, Any]]) -> str:
    """The attempt's state timeline as a Mermaid ``stateDiagram-v2``, each
    transition labelled in the words of ``projections.labels``."""
    lines = ["stateDiagram-v2"]
    state = "[*]"
    for row in rows:
        label = _mermaid_text(event_label(row))
        if row["type"] in OBSERVATION_EVENTS:
            lines.append(f"    note right of {state} : {label}")
            continue
        target = _mermaid_state(state_after(row, state))
        lines.append(f"    {state} --> {target} : {label}")
        state = target
    if state in SETTLED:
        lines.append(f"    {state} --> [*]")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in " _-()." else " " for ch in text)


def _mermaid_state(state: str) -> str:
    """A state name Mermaid reads as one (a stored status is only ever snake_case)."""
    if state == "[*]":
        return state
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in state)


def audit_stream(
    store: EventStore, stream_id: str, anchor: tuple[int, str] | None = None
) -> dict[str, Any]:
    """One stream's redacted timeline and the verdict of its hash chain."""
    events, undecodable = store.audit_events(stream_id)
    check = verify_chain(stream_id, events, anchor if undecodable is None else None)
    first_bad = check.first_bad_version
    reason = check.reason
    if undecodable is not None and (first_bad is None or undecodable < first_bad):
        first_bad, reason = undecodable, "undecodable"
    return {
        "stream_id": stream_id,
        "events": timeline(events),
        "verified": first_bad is None,
        "first_bad_version": first_bad,
        "reason": reason,
    }


def audit_attempt(store: EventStore, views: ViewStore | None, attempt_id: str) -> dict[str, Any]:
    """An attempt's audit with its proposal and directory context.

    The attempt stream is anchored to the status view's recorded head, so an
    edit or removal of its newest event is detected too.
    """
    anchor = None
    if views is not None:
        view = views.get_view(STATUS_VIEW, attempt_id)
        if view is not None and view.data.get("chain_head"):
            anchor = (view.version, str(view.data["chain_head"]))
    attempt = audit_stream(store, attempt_id, anchor)
    context: list[dict[str, Any]] = []
    first = attempt["events"][0]["data"] if attempt["events"] else {}
    related = []
    if first.get("proposal_id"):
        related.append(str(first["proposal_id"]))
    for record_id in _directory_ids(first):
        related.append(record_id)
    for stream_id in related:
        context.append(audit_stream(store, stream_id))
    verified = attempt["verified"] and all(c["verified"] for c in context)
    return {"attempt": attempt, "context": context, "verified": verified}


def _directory_ids(queued: dict[str, Any]) -> list[str]:
    ids = []
    if queued.get("actor_id"):
        ids.append(actor_record_id(str(queued["actor_id"])))
        if queued.get("permission"):
            ids.append(grant_record_id(str(queued["actor_id"]), str(queued["permission"])))
    if queued.get("identity_binding_id"):
        ids.append(identity_binding_record_id(str(queued["identity_binding_id"])))
    if queued.get("channel_binding_id"):
        ids.append(channel_binding_record_id(str(queued["channel_binding_id"])))
    if queued.get("capability") and queued.get("executor_build"):
        ids.append(
            executor_build_record_id(str(queued["capability"]), str(queued["executor_build"]))
        )
    if queued.get("target_id"):
        ids.append(target_record_id(str(queued["target_id"])))
    # and whatever else the approval relied on (the policy set, a standing grant)
    for pair in queued.get("authorized") or ():
        if isinstance(pair, list | tuple) and pair and str(pair[0]) not in ids:
            ids.append(str(pair[0]))
    return ids
