"""The policy set as a decision reads it, and the verdict on one proposal.

The policy set is one directory record (``policy-set:default``), read like
every other record a decision relies on and condition-checked by the commit
that acts on it. Its absence is a fact too: it reads as an empty set at
version 0 (kept in the read cache like a record; the commit's ``ReadCheck``
at version 0 says it must still be absent), so a ledger without policies pays
no extra store read per decision and behaves exactly as before policies.

A verdict is a pure function of the policy set (by digest) and the request,
so it is kept in a small LRU (``remembered``): the proposal, its approval and
the worker's recheck ask the same question of the same set, and Cedar answers
it once. The time is part of the question only where a policy may read
``context.now`` (``CompiledPolicies.reads_now``), at the millisecond Cedar sees.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from datetime import datetime
from typing import TYPE_CHECKING

from domain.directory import POLICY_SET_RECORD_ID
from domain.errors import InvalidPolicySet
from domain.policy import (
    NO_POLICIES,
    CompiledPolicies,
    PolicyDecision,
    PolicyRequest,
    cedar_datetime,
    compiled,
    evaluate,
)
from domain.services.read_cache import DirectorySnapshot
from domain.spec import ProposalSpec

if TYPE_CHECKING:
    from domain.services.authorization import DirectoryReads

NO_POLICY_SET = DirectorySnapshot.of(POLICY_SET_RECORD_ID, 0, {})


def policy_set_snapshot(reads: DirectoryReads) -> DirectorySnapshot:
    """The policy set record as ``reads`` finds it; version 0 and no values when
    there is none (cached as such: every commit relying on it checks it)."""
    found = reads.get(POLICY_SET_RECORD_ID)
    if found is not None:
        return found
    reads.ctx.cache.put(POLICY_SET_RECORD_ID, NO_POLICY_SET)
    return NO_POLICY_SET


def configured(snapshot: DirectorySnapshot) -> CompiledPolicies | None:
    """The compiled set, or None when there are no policies (absent or empty):
    then nothing is evaluated and ``policy_digest`` binds nothing."""
    text = snapshot.values.get("text")
    if not isinstance(text, str) or not text.strip():
        return None
    return compiled(text, snapshot.text("digest") or None)


def decide(
    snapshot: DirectorySnapshot,
    actor_id: str,
    groups: tuple[str, ...],
    spec: ProposalSpec,
    now: datetime,
) -> PolicyDecision:
    """The verdict of the policy set on this proposal, now. A stored set that no
    longer compiles raises ``InvalidPolicySet`` (the caller fails closed)."""
    policies = configured(snapshot)
    if policies is None:
        return NO_POLICIES
    request = PolicyRequest.of(actor_id, groups, spec, now)
    return remembered(policies, request)


_DECISIONS: OrderedDict[Hashable, PolicyDecision] = OrderedDict()
_DECISIONS_LOCK = threading.Lock()
_DECISIONS_MAX = 2048


def remembered(policies: CompiledPolicies, request: PolicyRequest) -> PolicyDecision:
    """``evaluate``, answered from the LRU when this set was asked this question."""
    key = decision_key(policies, request)
    with _DECISIONS_LOCK:
        held = _DECISIONS.get(key)
        if held is not None:
            _DECISIONS.move_to_end(key)
            return held
    decision = evaluate(policies, request)
    with _DECISIONS_LOCK:
        _DECISIONS[key] = decision
        while len(_DECISIONS) > _DECISIONS_MAX:
            _DECISIONS.popitem(last=False)
    return decision


def decision_key(policies: CompiledPolicies, request: PolicyRequest) -> Hashable:
    """Everything the verdict depends on. Each content value keeps its type
    (``True == 1`` in Python, not in Cedar); the time only where it is read."""
    content = tuple(sorted((k, type(v).__name__, v) for k, v in request.content.items()))
    return (
        policies.digest,
        request.actor_id,
        request.groups,
        request.capability,
        request.permission,
        request.effect,
        request.destination,
        content,
        request.target_id,
        request.base_revision,
        cedar_datetime(request.at) if policies.reads_now else None,
    )


def groups_of(actor: DirectorySnapshot) -> tuple[str, ...]:
    raw = actor.values.get("groups") or ()
    return tuple(str(g) for g in raw)


__all__ = [
    "NO_POLICY_SET",
    "InvalidPolicySet",
    "configured",
    "decide",
    "groups_of",
    "policy_set_snapshot",
]
