"""How a proposal version was approved: the approval kinds (design.md 2.7).

Recorded on the claim (``Claimed`` on the proposal, ``Queued`` on the attempt)
and shown in the status view, the proposal view, the inbox, the audit and the
``proposal.approved`` webhook. One shape for every kind, ids only (I10):

- ``human``: ``approvers`` is the one actor who approved;
- ``policy``: no approvers; ``policy_id``, ``policy_set_version`` and
  ``policy_digest`` of the ``@auto_approve`` permit that approved it;
- ``grant``: no approvers; ``grant_id``, which ``use`` of it this was, and its
  ``max_uses``; for a grant with use shards, the ``shard`` the use was taken
  from (its fence is what the dispatch marker checks);
- ``quorum``: ``approvers`` lists every counted voter in vote order, with
  ``group``, ``required``, the ``policy_id`` that asked for it and each
  voter's ``ballots`` (the actor and bindings they voted through, ids only;
  ``domain.quorum``).

A claim stored before kinds existed has no ``approval``: it was a human
approval by the proposal's actor (``approval_or_human``).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class ApprovalKind(StrEnum):
    """Who or what approved a proposal version."""

    HUMAN = "human"
    QUORUM = "quorum"
    POLICY = "policy"
    GRANT = "grant"


def human_approval(actor_id: str) -> dict[str, Any]:
    return {"kind": ApprovalKind.HUMAN.value, "approvers": [actor_id]}


def policy_approval(policy_id: str, version: int, digest: str) -> dict[str, Any]:
    return {
        "kind": ApprovalKind.POLICY.value,
        "approvers": [],
        "policy_id": policy_id,
        "policy_set_version": version,
        "policy_digest": digest,
    }


def grant_approval(
    grant_id: str, use: int, max_uses: int, shard: int | None = None
) -> dict[str, Any]:
    approval: dict[str, Any] = {
        "kind": ApprovalKind.GRANT.value,
        "approvers": [],
        "grant_id": grant_id,
        "use": use,
        "max_uses": max_uses,
    }
    if shard is not None:
        approval["shard"] = shard
    return approval


def kind_of(approval: Mapping[str, Any] | None) -> ApprovalKind:
    """The kind of a recorded approval (None: a claim from before kinds, human)."""
    if approval is None:
        return ApprovalKind.HUMAN
    return ApprovalKind(approval["kind"])


def approval_or_human(approval: Mapping[str, Any] | None, actor_id: str) -> dict[str, Any]:
    """The recorded approval, or for a claim from before kinds the human one it was."""
    return dict(approval) if approval is not None else human_approval(actor_id)


def needs_channel(kind: ApprovalKind) -> bool:
    """Whether the requesting actor approved through a presentation (their identity
    and channel bindings are part of the authorization, I7). A quorum's voters'
    bindings are checked ballot by ballot instead; a policy or a grant has none."""
    return kind is ApprovalKind.HUMAN
