"""Scenario 1: exact preview binding, on every backend."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from domain.directory import DirectoryKind, grant_record_id
from domain.errors import InvalidSpec
from domain.proposal import Proposal
from domain.services.proposals import propose
from domain.spec import canonical_bytes, format_utc, parse_spec, payload_hash, view_hash
from tests.support.worlds.approval import DIGEST, SPEC_EXPIRES, World, base_spec

OTHER = "sha256:" + "cd" * 32

SEMANTIC_CHANGES: dict[str, dict[str, Any]] = {
    "destination": {"destination": "tasks-archive"},
    "content": {"content": {"title": "Buy oat milk"}},
    "content_nested": {"content": {"title": "Buy milk", "tags": ["a"]}},
    "permission": {"permission": "social.post"},
    "policy_digest": {"policy_digest": OTHER},
    "plugin_build": {"plugin_build": OTHER},
    "sources": {"sources": ["message:124"]},
    "base_revision": {"target": {"id": "task:42", "base_revision": "r8"}},
    "target_id": {"target": {"id": "task:43", "base_revision": "r7"}},
    "expiry": {"expires_at": format_utc(SPEC_EXPIRES + timedelta(seconds=1))},
    "effect": {"effect": "update"},
}


def test_key_order_gives_equal_hashes(world: World) -> None:
    spec = base_spec()
    reordered = json.loads(json.dumps(dict(reversed(list(spec.items())))))
    a = propose(world.ctx, actor_id="alice", spec_data=spec)
    b = propose(world.ctx, actor_id="alice", spec_data=reordered)
    assert (a.payload_hash, a.view_hash) == (b.payload_hash, b.view_hash)
    assert a.proposal_id != b.proposal_id


@pytest.mark.parametrize("field", sorted(SEMANTIC_CHANGES))
def test_each_semantic_change_changes_both_hashes(world: World, field: str) -> None:
    world.put(DirectoryKind.PERMISSION_GRANT, grant_record_id("alice", "social.post"), granted=True)
    base = propose(world.ctx, actor_id="alice", spec_data=base_spec())
    changed = propose(world.ctx, actor_id="alice", spec_data=base_spec(**SEMANTIC_CHANGES[field]))
    assert changed.payload_hash != base.payload_hash
    assert changed.view_hash != base.view_hash


def test_a_schema_digest_change_changes_both_hashes(world: World) -> None:
    """A spec can name another schema only with another build (the schema is the
    build's): its hashes, computed as propose computes them, differ all the same."""
    renderer = world.ctx.renderer

    def hashes(spec: Any) -> tuple[str, str]:
        parsed = parse_spec(spec)
        ph = payload_hash(parsed)
        return ph, view_hash(ph, renderer.build, renderer.render(parsed))

    base, changed = hashes(base_spec()), hashes(base_spec(schema_digest=OTHER))
    assert changed[0] != base[0] and changed[1] != base[1]


def test_a_schema_digest_other_than_the_builds_is_refused_and_named(world: World) -> None:
    with pytest.raises(InvalidSpec) as refused:
        propose(world.ctx, actor_id="alice", spec_data=base_spec(schema_digest=OTHER))
    assert [p.pointer for p in refused.value.problems] == ["/spec/schema_digest"]


def test_executor_build_change_changes_both_hashes(world: World) -> None:
    from adapters.executors.fake import fake_build_digest

    base = propose(world.ctx, actor_id="alice", spec_data=base_spec())
    cap = "fake.correlation_lookup"
    other = propose(
        world.ctx,
        actor_id="alice",
        spec_data=base_spec(capability=cap, executor_build=fake_build_digest(cap)),
    )
    assert other.payload_hash != base.payload_hash
    assert other.view_hash != base.view_hash


def test_stored_spec_is_the_canonical_spec_that_was_hashed(world: World) -> None:
    result = propose(world.ctx, actor_id="alice", spec_data=base_spec(plugin_build=DIGEST))
    proposal = world.store.get(Proposal, result.proposal_id)
    assert proposal is not None
    stored = proposal.versions[1]
    spec = parse_spec(stored["spec"])
    assert payload_hash(spec) == stored["payload_hash"] == result.payload_hash
    assert canonical_bytes(spec) == canonical_bytes(parse_spec(base_spec()))
    assert stored["view_hash"] == result.view_hash
