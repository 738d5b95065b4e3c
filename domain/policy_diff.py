"""What applying a policy set changes, policy by policy (``ledger policies diff``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cedarpy

from domain.policy import CompiledPolicies


def policy_text(form: Any) -> str:
    """One policy's Cedar text from its JSON form (``diff`` shows it)."""
    single = {"staticPolicies": {"policy0": form}, "templates": {}, "templateLinks": []}
    text = cedarpy.policies_from_json_str(json.dumps(single))
    try:
        return cedarpy.format_policies(text).rstrip()
    except ValueError:
        return text.rstrip()


@dataclass(frozen=True)
class PolicyChange:
    """One line of a diff: ``added``, ``removed`` or ``changed`` and the policy id."""

    change: str
    policy_id: str


def diff(current: CompiledPolicies | None, proposed: CompiledPolicies) -> list[PolicyChange]:
    """What applying ``proposed`` over ``current`` changes, policy by policy."""
    before: Mapping[str, Any] = current.forms if current is not None else {}
    after = proposed.forms
    changes = [PolicyChange("removed", i) for i in before if i not in after]
    for policy_id, form in after.items():
        if policy_id not in before:
            changes.append(PolicyChange("added", policy_id))
        elif before[policy_id] != form:
            changes.append(PolicyChange("changed", policy_id))
    return changes
