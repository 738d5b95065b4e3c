"""Policy sets and standing grants for tests: the worked examples of docs/policies.md."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from domain.services.policies import PolicySetView, apply_policy_set
from tests.support.worlds.approval import CAPABILITY, World

SMALL_TASKS = f"""
@id("small-tasks")
@auto_approve
permit (principal, action == Action::"{CAPABILITY}", resource)
when {{ context.content has minutes && context.content.minutes <= 30 }};
"""
NO_DELETIONS = """
@id("no-deletions")
forbid (principal, action, resource)
when { context.effect == "delete" };
"""
EXAMPLES = SMALL_TASKS + NO_DELETIONS


def apply(world: World, text: str = EXAMPLES) -> PolicySetView:
    """Apply ``text`` as the policy set (through the read cache of the world)."""
    return apply_policy_set(world.store, world.clock, text, cache=world.ctx.cache)


def grant_bounds(world: World, **changes: Any) -> dict[str, Any]:
    bounds: dict[str, Any] = {
        "capability": CAPABILITY,
        "max_uses": 3,
        "expires_at": (world.clock.now() + timedelta(days=7)).isoformat(),
    }
    bounds.update(changes)
    return bounds
