"""Quorum (the two-person rule): M distinct approvers out of a group (I13).

A ``permit`` policy marked ``@quorum("M")`` and ``@group("name")`` that holds
for a proposal makes it wait for M distinct members of the group, none of them
the requesting actor (docs/policies.md). Each member approves through their own
presentation; a vote that is not the M-th is appended to the proposal
(``VoteRecorded``), and the M-th claims the version in the commit that
condition-checks every counted voter's records (enabled, member, identity and
channel bindings) at that moment. A member's decline declines the version.

The largest M is what one atomic commit holds: DynamoDB's transaction takes 100
items; the claim needs 2 events, 2 stream heads and 1 due entry, 5 read checks
of the requesting side (its actor, its permission grant, the executor build,
the policy set, the target), and 3 per counted voter (actor, identity binding,
channel binding): 10 + 3 M <= 100, so M <= 30.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from domain.errors import InvalidPolicySet

QUORUM_ANNOTATION = "quorum"
GROUP_ANNOTATION = "group"
CLAIM_FIXED_ITEMS = 10
"""The claim commit's items besides the voters' read checks (see the module docstring)."""
ITEMS_PER_VOTER = 3
TRANSACTION_ITEMS = 100
MAX_QUORUM = (TRANSACTION_ITEMS - CLAIM_FIXED_ITEMS) // ITEMS_PER_VOTER
"""The largest M a policy may ask for: 30."""
GROUP_PATTERN = re.compile(r"[^\s\x00-\x1f]{1,128}")


@dataclass(frozen=True)
class QuorumRule:
    """M distinct members of ``group`` must approve; ``policy_id`` asked for it."""

    required: int
    group: str
    policy_id: str

    def as_dict(self) -> dict[str, Any]:
        return {"required": self.required, "group": self.group, "policy_id": self.policy_id}


def quorum_of(policy_id: str, effect: str, annotations: Mapping[str, Any]) -> QuorumRule | None:
    """The quorum a policy's annotations ask for, or None; ``InvalidPolicySet``
    for a malformed one (on a forbid, with ``@auto_approve``, M not 1..30, no group)."""
    has_quorum = QUORUM_ANNOTATION in annotations
    has_group = GROUP_ANNOTATION in annotations
    if not has_quorum and not has_group:
        return None
    where = f"policy {policy_id!r}"
    if not has_quorum or not has_group:
        raise InvalidPolicySet(f'{where}: @quorum("M") and @group("name") go together')
    if effect != "permit":
        raise InvalidPolicySet(f"{where}: @quorum marks permit policies only")
    if "auto_approve" in annotations:
        raise InvalidPolicySet(f"{where}: @quorum and @auto_approve exclude each other")
    raw = annotations[QUORUM_ANNOTATION]
    if not isinstance(raw, str) or not raw.isdigit() or not 1 <= int(raw) <= MAX_QUORUM:
        raise InvalidPolicySet(
            f"{where}: @quorum takes a number of approvers from 1 to {MAX_QUORUM} "
            "(one atomic commit checks every counted voter)"
        )
    group = annotations[GROUP_ANNOTATION]
    if not isinstance(group, str) or not GROUP_PATTERN.fullmatch(group):
        raise InvalidPolicySet(f"{where}: @group takes a group name (1-128 characters)")
    return QuorumRule(int(raw), group, policy_id)


def strictest(rules: Sequence[QuorumRule]) -> QuorumRule | None:
    """Of several quorum policies that hold, the one asking for the most
    approvers (ties: the first policy id): one claim meets them all only if
    their groups agree, so the strictest one is what is asked."""
    if not rules:
        return None
    return sorted(rules, key=lambda r: (-r.required, r.policy_id))[0]


def quorum_approval(
    rule: QuorumRule, voters: Sequence[Mapping[str, str]], *, escalated: bool = False
) -> dict[str, Any]:
    """The approval a quorum claim records: every counted voter, in vote order,
    with the bindings they voted through (ids only), the group and the number;
    ``escalated``: the version had escalated and ``group`` is its fallback group
    (the worker's recheck counts the voters there whatever the policy set says
    by then, as the claim did)."""
    found: dict[str, Any] = {
        "kind": "quorum",
        "approvers": [v["actor_id"] for v in voters],
        "group": rule.group,
        "required": rule.required,
        "policy_id": rule.policy_id,
        "ballots": [
            [
                v["actor_id"],
                v["identity_binding_id"],
                v["channel_binding_id"],
                v["conversation_key"],
            ]
            for v in voters
        ],
    }
    if escalated:
        found["escalated"] = True
    return found


def distinct_votes(votes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Each voter's first vote, in vote order: no approver counts twice."""
    seen: set[str] = set()
    first: list[Mapping[str, Any]] = []
    for vote in votes:
        if vote["actor_id"] not in seen:
            seen.add(vote["actor_id"])
            first.append(vote)
    return first
