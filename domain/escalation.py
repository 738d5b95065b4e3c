"""Escalation: an approval still unanswered shortly before it expires goes, once,
to a named fallback group (docs/policies.md).

A ``permit`` policy marked ``@escalate_to("group")`` and
``@escalate_before("15m")`` (a lead time: a number and ``s``, ``m`` or ``h``,
at most 24 hours) that holds for a proposal asking for a person's approval or
for a quorum makes the runtime's housekeeping pass escalate the current
version when its expiry is that close and nothing has decided it: one
``Escalated`` event revokes every active presentation and names the group, and
``proposal.escalated`` tells the channel service to present the version to the
group's members. From then on the version is approved as a quorum of the
fallback group: as many members as the quorum asked for (one for a single
approval), never the requesting actor; votes recorded before count only when
their voter is a member of the fallback group. A version escalates at most
once: the event is appended with the proposal's version check, so of two
processes racing exactly one appends it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain.errors import InvalidPolicySet
from domain.quorum import GROUP_PATTERN, QuorumRule

ESCALATE_TO_ANNOTATION = "escalate_to"
ESCALATE_BEFORE_ANNOTATION = "escalate_before"
MAX_LEAD = timedelta(hours=24)
_LEAD = re.compile(r"([1-9][0-9]{0,5})([smh])")
_UNITS = {"s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True)
class EscalationRule:
    """Escalate to ``group`` once ``lead`` before expiry; ``policy_id`` asked for it."""

    group: str
    lead: timedelta
    policy_id: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "lead_seconds": int(self.lead.total_seconds()),
            "policy_id": self.policy_id,
        }

    def due(self, expires_at: datetime, now: datetime) -> bool:
        """Inside the window: at or after ``expires_at - lead``, before the expiry."""
        return expires_at - self.lead <= now < expires_at


def escalation_of(
    policy_id: str, effect: str, annotations: Mapping[str, Any]
) -> EscalationRule | None:
    """The escalation a policy's annotations ask for, or None; ``InvalidPolicySet``
    for a malformed one (on a forbid or with ``@auto_approve``, a half of the
    pair missing, a bad group or lead time)."""
    has_to = ESCALATE_TO_ANNOTATION in annotations
    has_before = ESCALATE_BEFORE_ANNOTATION in annotations
    if not has_to and not has_before:
        return None
    where = f"policy {policy_id!r}"
    if not has_to or not has_before:
        raise InvalidPolicySet(
            f'{where}: @escalate_to("group") and @escalate_before("15m") go together'
        )
    if effect != "permit":
        raise InvalidPolicySet(f"{where}: @escalate_to marks permit policies only")
    if "auto_approve" in annotations:
        raise InvalidPolicySet(f"{where}: @escalate_to and @auto_approve exclude each other")
    group = annotations[ESCALATE_TO_ANNOTATION]
    if not isinstance(group, str) or not GROUP_PATTERN.fullmatch(group):
        raise InvalidPolicySet(f"{where}: @escalate_to takes a group name (1-128 characters)")
    raw = annotations[ESCALATE_BEFORE_ANNOTATION]
    found = _LEAD.fullmatch(raw) if isinstance(raw, str) else None
    lead = timedelta(seconds=int(found[1]) * _UNITS[found[2]]) if found else None
    if lead is None or lead > MAX_LEAD:
        raise InvalidPolicySet(
            f"{where}: @escalate_before takes a lead time such as 30s, 15m or 2h (at most 24h)"
        )
    return EscalationRule(group, lead, policy_id)


def first_escalation(rules: Sequence[EscalationRule | None]) -> EscalationRule | None:
    """Of the policies that hold, the escalation of the first policy id."""
    present = [r for r in rules if r is not None]
    return sorted(present, key=lambda r: r.policy_id)[0] if present else None


def escalated_rule(escalated: Mapping[str, Any], rule: QuorumRule | None) -> QuorumRule:
    """The quorum an escalated version needs: the fallback group, as many members
    as the quorum asked for (one for a single approval)."""
    required = rule.required if rule is not None else 1
    return QuorumRule(required, str(escalated["group"]), str(escalated["policy_id"]))
