"""The human words for every event type, and where an attempt's events lead it.

One table for every picture of a timeline: the audit view's Mermaid state
diagram (``projections.audit``) and the console's SVG timeline
(``api/console/svg.py``) both label an event and place it on the state path
from here, so the two cannot word the same event differently.

Event types are the short names the audit timeline shows (``Leased``, not
``ExecutionAttempt.Leased``); no two aggregates share one (a test holds it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.attempt import AttemptStatus

EVENT_WORDS: dict[str, str] = {
    # execution attempt
    "Queued": "queued",
    "Leased": "leased",
    "Requeued": "requeued",
    "DispatchStarted": "dispatch started",
    "ResultRecorded": "result recorded",
    "LateResultObserved": "late result observed",
    "LookedAgain": "looked again",
    "PossiblyDispatched": "possibly dispatched (found unsettled by a restore)",
    "EffectAfterNoEffect": "effect seen after no effect",
    "ManuallyResolved": "manually resolved",
    "Acknowledged": "acknowledged by an admin",
    # proposal
    "Proposed": "proposed",
    "Revised": "new version proposed",
    "Presented": "presented for approval",
    "PresentationsLapsed": "presentations lapsed",
    "Claimed": "approved (claimed)",
    "Declined": "declined",
    "VoteRecorded": "a quorum member's vote recorded",
    "Escalated": "the approval escalated to a fallback group",
    "Canceled": "canceled",
    "Conflicted": "conflicted (the target changed)",
    # directory record
    "Registered": "registered",
    "Changed": "changed",
    "Used": "standing grant used",
    # restore log
    "RestoreLogOpened": "restore log opened",
    "BackupRestored": "a backup was restored",
    "RestoreSettled": "restore settled (unsettled attempts marked)",
}
"""Event type -> the words a picture of the timeline shows for it."""

STATE_AFTER: dict[str, str] = {
    "Queued": AttemptStatus.QUEUED.value,
    "Leased": AttemptStatus.EXECUTING.value,
    "Requeued": AttemptStatus.QUEUED.value,
    "DispatchStarted": AttemptStatus.EXECUTING.value,
    "PossiblyDispatched": AttemptStatus.EXECUTING.value,
    "EffectAfterNoEffect": AttemptStatus.EFFECT_AFTER_NO_EFFECT.value,
    "ManuallyResolved": AttemptStatus.MANUALLY_RESOLVED.value,
}
"""Attempt event type -> the state it leads to. ``ResultRecorded`` leads to the
status it records; ``LateResultObserved`` and ``LookedAgain`` (a look of the
watch that found nothing) are observations and leave the state as it was (so
does an event of a type not listed)."""

RESULT_EVENT = "ResultRecorded"
OBSERVATION_EVENTS = frozenset({"LateResultObserved", "LookedAgain", "Acknowledged"})
"""Events drawn beside the state path, not on it: they change no state."""
REASONED_EVENTS = frozenset({"ResultRecorded", "Requeued"})
"""Events whose label names their reason (a bounded, redacted code)."""


def event_words(event_type: str) -> str:
    """The words for ``event_type``; an unknown type is shown as it is named."""
    return EVENT_WORDS.get(event_type, event_type)


def state_after(row: Mapping[str, Any], previous: str) -> str:
    """The attempt's state once the audit timeline row ``row`` happened."""
    kind = str(row["type"])
    if kind == RESULT_EVENT:
        return str(row["data"].get("status", previous))
    return STATE_AFTER.get(kind, previous)


def event_label(row: Mapping[str, Any]) -> str:
    """``v3 result recorded (provider_error)``: an audit timeline row in words,
    with its lease generation, reason or outcome when it has one."""
    kind = str(row["type"])
    data = row["data"]
    text = f"v{row['version']} {event_words(kind)}"
    if kind == "Leased" and data.get("generation") is not None:
        text += f" (generation {data['generation']})"
    reason = data.get("reason_code") or data.get("reason")
    if kind in REASONED_EVENTS and reason:
        text += f" ({reason})"
    if kind == "ManuallyResolved" and data.get("outcome"):
        text += f" ({data['outcome']})"
    if kind == "LookedAgain" and data.get("verdict"):
        text += f" (look {data.get('step')}: {data['verdict']})"
    if kind == "EffectAfterNoEffect" and data.get("source") == "watch":
        text += " (found by the watch)"
    return text
