"""Policy sets and standing grants for tests: the worked examples of docs/policies.md."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from domain.directory import (
    DirectoryKind,
    actor_record_id,
    channel_binding_record_id,
    identity_binding_record_id,
)
from domain.services.approval import Provenance
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


TWO_PERSON = f"""
@id("two-person-payments")
@quorum("2")
@group("finance")
permit (principal, action == Action::"{CAPABILITY}", resource)
when {{ context.content has amount && context.content.amount > 500 }};
"""


def quorum_policy(required: int, group: str = "finance") -> str:
    """Every proposal of the test capability needs ``required`` members of ``group``."""
    return f"""
@id("quorum-{required}")
@quorum("{required}")
@group("{group}")
permit (principal, action == Action::"{CAPABILITY}", resource);
"""


def member(i: int) -> Provenance:
    """Quorum member number ``i``: its actor, identity binding, channel binding, conversation."""
    return Provenance(f"m{i}", f"ib-m{i}", f"cb-m{i}", f"conv-m{i}")


def enrol_members(world: World, count: int, group: str = "finance") -> list[Provenance]:
    """``count`` enabled members of ``group``, each bound to its own conversation."""
    found = []
    for i in range(1, count + 1):
        who = member(i)
        world.put(DirectoryKind.ACTOR, actor_record_id(who.actor_id), enabled=True, groups=[group])
        world.put(
            DirectoryKind.IDENTITY_BINDING,
            identity_binding_record_id(who.identity_binding_id),
            actor_id=who.actor_id,
            channel="slack",
            external_id=f"U-{who.actor_id}",
            active=True,
        )
        world.put(
            DirectoryKind.CHANNEL_BINDING,
            channel_binding_record_id(who.channel_binding_id),
            conversation_key=who.conversation_key,
            channel="slack",
            active=True,
        )
        found.append(who)
    return found


def present_to(world: World, proposal_id: str, who: Provenance, version: int = 1) -> str:
    """A member's own presentation of the version; its token."""
    return world.present(
        proposal_id,
        version,
        identity_binding_id=who.identity_binding_id,
        channel_binding_id=who.channel_binding_id,
        conversation_key=who.conversation_key,
        actor_id=who.actor_id,
    ).token
