"""What a presentation's message shows, and how answers and webhooks move it.

Pure functions, no I/O. A presentation held by a channel is in one
:class:`Phase`; it only moves forward (:func:`moves_forward`), so a webhook
delivered twice, late or out of turn never takes a message back. Its message
is :func:`render`-ed from the phase and the rendered preview alone: nothing
else of the proposal is ever shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from channels.platform import Action, Button, Message


class Phase(StrEnum):
    """Where one presentation stands, as its channel knows it."""

    OPEN = "open"  # waiting for the actor
    VOTED = "voted"  # this approver's vote is counted; the quorum is not reached yet
    UNAVAILABLE = "unavailable"  # the ledger refused it: revoked, replaced or withdrawn
    APPROVED = "approved"  # claimed: the one attempt is queued
    OUTCOME_UNKNOWN = "outcome_unknown"
    SUCCEEDED = "succeeded"
    FAILED_SAFE = "failed_safe"
    EFFECT_AFTER_NO_EFFECT = "effect_after_no_effect"
    MANUALLY_RESOLVED = "manually_resolved"
    DECLINED = "declined"
    EXPIRED = "expired"
    CONFLICTED = "conflicted"


_RANK = {
    Phase.OPEN: 0,
    Phase.VOTED: 1,
    Phase.UNAVAILABLE: 2,  # an approval elsewhere may still be learnt of
    Phase.APPROVED: 3,
    Phase.OUTCOME_UNKNOWN: 4,
    Phase.SUCCEEDED: 5,
    Phase.FAILED_SAFE: 5,
    Phase.EFFECT_AFTER_NO_EFFECT: 6,
    Phase.MANUALLY_RESOLVED: 7,
    Phase.DECLINED: 8,
    Phase.EXPIRED: 8,
    Phase.CONFLICTED: 8,
}
DECIDED = frozenset(p for p, rank in _RANK.items() if rank >= _RANK[Phase.UNAVAILABLE])
"""Phases in which the token can no longer do anything: it is erased."""

ATTEMPT_PHASES = {
    "queued": Phase.APPROVED,
    "executing": Phase.APPROVED,
    "outcome_unknown": Phase.OUTCOME_UNKNOWN,
    "succeeded": Phase.SUCCEEDED,
    "failed_safe": Phase.FAILED_SAFE,
    "effect_after_no_effect": Phase.EFFECT_AFTER_NO_EFFECT,
    "manually_resolved": Phase.MANUALLY_RESOLVED,
}
VERSION_PHASES = {
    "declined": Phase.DECLINED,
    "expired": Phase.EXPIRED,
    "conflicted": Phase.CONFLICTED,
    "superseded": Phase.UNAVAILABLE,
    "canceled": Phase.UNAVAILABLE,
}
_DETAIL = re.compile(r"[a-z][a-z0-9_]{0,63}")


def moves_forward(current: Phase, new: Phase) -> bool:
    """Whether ``new`` is later than ``current`` (a repeat or an older fact is not)."""
    return _RANK[new] > _RANK[current]


class UnexpectedAnswer(ValueError):
    """The ledger answered a decision with a shape this channel does not know."""


@dataclass(frozen=True)
class Decision:
    """What the ledger said to one press: the new phase and what goes with it."""

    phase: Phase
    attempt_id: str | None = None
    votes: int | None = None
    required: int | None = None


def approval_decision(answer: Mapping[str, Any]) -> Decision:
    """``POST /approvals``'s answer: ``execution_pending`` with the attempt, or, for a
    quorum, ``vote_recorded`` with the votes counted so far and the number required."""
    status = answer.get("status")
    if status == "vote_recorded":
        votes, required = answer.get("votes"), answer.get("required")
        if not isinstance(votes, int) or not isinstance(required, int):
            raise UnexpectedAnswer("vote_recorded without votes and required")
        if not _count(votes) or not _count(required) or required < 1:
            raise UnexpectedAnswer("vote_recorded with counts out of range")
        return Decision(Phase.VOTED, votes=votes, required=required)
    attempt = answer.get("attempt_id")
    if status == "execution_pending" and isinstance(attempt, str):
        return Decision(Phase.APPROVED, attempt_id=attempt)
    raise UnexpectedAnswer(f"approval answered {status!r}")


def decline_decision(answer: Mapping[str, Any]) -> Decision:
    """``POST /declines``'s answer: ``declined``, or ``claimed`` when an approval won."""
    status = answer.get("status")
    if status == "declined":
        return Decision(Phase.DECLINED)
    attempt = answer.get("attempt_id")
    if status == "claimed" and isinstance(attempt, str):
        return Decision(Phase.APPROVED, attempt_id=attempt)
    raise UnexpectedAnswer(f"decline answered {status!r}")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10_000


@dataclass(frozen=True)
class Outcome:
    """A fact about one proposal version, from a ledger webhook."""

    proposal_id: str
    version: int
    phase: Phase
    detail: str | None = None
    attempt_id: str | None = None


def outcomes_of(event: Mapping[str, Any]) -> list[Outcome]:
    """The facts a verified webhook body tells (an unknown type tells none).

    ``attempt.*``: the attempt's status view (``proposal_id``,
    ``proposal_version``, ``status``, ``result``, ``resolution``).
    ``proposal.declined`` / ``proposal.expired``: the proposal view, whose
    ``versions`` say which version is declined, expired, replaced or withdrawn."""
    kind = event.get("type")
    if not isinstance(kind, str):
        return []
    if kind.startswith("attempt."):
        phase = ATTEMPT_PHASES.get(str(event.get("status")))
        proposal_id, version = event.get("proposal_id"), event.get("proposal_version")
        if phase is None or not isinstance(proposal_id, str) or not isinstance(version, int):
            return []
        return [
            Outcome(
                proposal_id,
                version,
                phase,
                detail=_attempt_detail(event),
                attempt_id=_text(event.get("attempt_id")),
            )
        ]
    if kind.startswith("proposal."):
        proposal_id, versions = event.get("proposal_id"), event.get("versions")
        if not isinstance(proposal_id, str) or not isinstance(versions, list):
            return []
        found = []
        for entry in versions:
            if not isinstance(entry, Mapping) or not _count(entry.get("version")):
                continue
            status = str(entry.get("status"))
            phase = VERSION_PHASES.get(status)
            if phase is not None:
                detail = status if phase is Phase.UNAVAILABLE else None
                found.append(Outcome(proposal_id, int(entry["version"]), phase, detail=detail))
        return found
    return []


def _attempt_detail(event: Mapping[str, Any]) -> str | None:
    resolution = event.get("resolution")
    if isinstance(resolution, Mapping):
        return _code(resolution.get("outcome"))
    result = event.get("result")
    if isinstance(result, Mapping):
        return _code(result.get("reason_code"))
    return None


def _code(value: Any) -> str | None:
    """A bounded code, shown as it is; anything else is not shown at all."""
    return value if isinstance(value, str) and _DETAIL.fullmatch(value) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# -- what the message says -------------------------------------------------------------

APPROVE_LABEL = "Approve"
DECLINE_LABEL = "Decline"


def status_line(
    phase: Phase,
    *,
    detail: str | None = None,
    votes: int | None = None,
    required: int | None = None,
    expires_at: str | None = None,
) -> str:
    """The line under the preview that says where the approval stands."""
    tally = f"{votes} of {required} approvals so far. " if votes is not None and required else ""
    match phase:
        case Phase.OPEN:
            until = f" by {expires_at}" if expires_at else ""
            return f"{tally}Approve or decline{until}."
        case Phase.VOTED:
            return f"Your approval is counted: {votes} of {required}. Waiting for the others."
        case Phase.APPROVED:
            return "Approved. Running it..."
        case Phase.SUCCEEDED:
            return "Approved. Done: it succeeded."
        case Phase.FAILED_SAFE:
            why = f" ({detail})" if detail else ""
            return f"Approved. It failed, and nothing was changed{why}."
        case Phase.OUTCOME_UNKNOWN:
            return "Approved. Needs an operator: whether it happened is not known yet."
        case Phase.EFFECT_AFTER_NO_EFFECT:
            return "Approved. Needs an operator: it was found to have happened after all."
        case Phase.MANUALLY_RESOLVED:
            if detail == "effect_applied":
                return "Approved. Settled by an operator: it happened."
            if detail == "no_effect":
                return "Approved. Settled by an operator: it did not happen."
            return "Approved. Settled by an operator."
        case Phase.DECLINED:
            return "Declined. Nothing will be done."
        case Phase.EXPIRED:
            return "Expired: it can no longer be approved."
        case Phase.CONFLICTED:
            return "Not run: what it would change has changed since it was proposed."
        case Phase.UNAVAILABLE:
            return "No longer waiting for your answer."
    raise AssertionError(phase)  # pragma: no cover - every phase is matched


def render(
    phase: Phase,
    preview: str,
    reference: str,
    *,
    detail: str | None = None,
    votes: int | None = None,
    required: int | None = None,
    expires_at: str | None = None,
) -> Message:
    """The whole message: the preview as the ledger rendered it, the status line,
    and the two buttons while the approval is open."""
    line = status_line(phase, detail=detail, votes=votes, required=required, expires_at=expires_at)
    buttons: tuple[Button, ...] = ()
    if phase is Phase.OPEN:
        buttons = (
            Button(APPROVE_LABEL, Action.APPROVE, reference),
            Button(DECLINE_LABEL, Action.DECLINE, reference),
        )
    return Message(f"{preview}\n\n{line}", buttons, preview=preview, status=line)


STATUS_LINE_ROOM = 200
"""Characters kept for the status line after the preview (the longest is ~90)."""


# -- what the presser is told ----------------------------------------------------------


class Reply(StrEnum):
    """The answers to a press (shown to the presser only)."""

    APPROVED = "Approved."
    DECLINED = "Declined."
    ALREADY_APPROVED = "Already approved."
    ALREADY_DECLINED = "Already declined."
    EXPIRED = "This approval has expired."
    NOT_AVAILABLE = "This approval is not available."
    NOT_FOR_YOU = "This approval is not for you."
    CONFLICTED = "It changed since it was proposed: it will not run."
    TRY_AGAIN = "The ledger did not answer. Try again in a moment."


def reply_to_decided(phase: Phase) -> str:
    """The answer to a press on a presentation already decided."""
    if phase is Phase.DECLINED:
        return Reply.ALREADY_DECLINED.value
    if phase is Phase.EXPIRED:
        return Reply.EXPIRED.value
    if phase is Phase.CONFLICTED:
        return Reply.CONFLICTED.value
    if phase is Phase.UNAVAILABLE:
        return Reply.NOT_AVAILABLE.value
    return Reply.ALREADY_APPROVED.value


def vote_reply(votes: int | None, required: int | None) -> str:
    return f"Your approval is counted: {votes} of {required}."
