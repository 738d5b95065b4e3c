"""Standing grants ("allow always") approve what their bounds cover, count each
use in the claim's commit and stop at their maximum, expiry or revocation
(I14), on memory, SQLite and the emulator."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.store import LedgerStore
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.directory import (
    DirectoryKind,
    DirectoryRecord,
    standing_grant_fence_id,
    standing_grant_record_id,
    standing_grant_uses_id,
)
from domain.errors import (
    InvalidInput,
    NotFound,
    PolicyDenied,
    StandingGrantRefused,
    TooManyStandingGrants,
)
from domain.services import grants
from domain.services.approval import Provenance
from domain.services.proposals import propose
from domain.standing_grants import MAX_LIVE_GRANTS
from tests.support.policies import SMALL_TASKS, apply, grant_bounds
from tests.support.worlds.approval import World, base_spec
from tests.support.worlds.execution import ExecutionWorld

ADMIN = grants.Grantor("admin", "ops")


def give(world: World, **changes: object) -> str:
    made = grants.grant(
        world.ctx, actor_id="alice", bounds=grant_bounds(world, **changes), grantor=ADMIN
    )
    return str(made["grant_id"])


def topics(store: LedgerStore, stream_id: str) -> list[str]:
    return [e.topic.rsplit(".", 1)[-1] for e in store.read_stream(stream_id)]


def test_a_proposal_within_a_grant_is_claimed_by_it_and_the_use_counted_on_a_shard(
    world: World, store: LedgerStore
) -> None:
    grant_id = give(world, max_uses=2)
    assert grants.get(world.ctx, grant_id)["use_shards"] == 2  # one per use, at most
    first = propose(world.ctx, actor_id="alice", spec_data=base_spec())
    assert first.status == "claimed" and first.approval is not None
    shard = first.approval["shard"]
    assert first.approval == {
        "kind": "grant",
        "approvers": [],
        "grant_id": grant_id,
        "use": shard + 1,  # each shard's quota is 1: use n is shard n - 1's
        "max_uses": 2,
        "shard": shard,
    }
    assert topics(store, standing_grant_record_id(grant_id)) == ["Registered"]  # never moved
    assert topics(store, standing_grant_uses_id(grant_id, shard)) == ["Registered", "Used"]
    attempt = store.get(ExecutionAttempt, first.attempt_id or "")
    assert attempt is not None and attempt.approval == first.approval
    pins = [list(p) for p in attempt.authorized or []]
    assert [standing_grant_fence_id(grant_id, shard), 0] in pins  # what the marker checks
    assert [standing_grant_record_id(grant_id), 1] in pins
    second = propose(world.ctx, actor_id="alice", spec_data=base_spec())
    assert second.approval is not None and second.approval["shard"] == 1 - shard
    assert {first.approval["use"], second.approval["use"]} == {1, 2}
    third = propose(world.ctx, actor_id="alice", spec_data=base_spec())
    assert third.status == "presented"  # spent: a person decides
    shown = grants.get(world.ctx, grant_id)
    assert (shown["uses"], shown["state"]) == (2, "spent")


def test_a_grant_made_without_use_shards_counts_its_uses_on_its_record(
    world: World, store: LedgerStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a store that shards nothing makes (a DynamoDB table whose layout records
    no grant shards), and every grant made before use shards."""
    monkeypatch.setattr(world.ctx.store, "grant_use_shards", lambda: 0)
    grant_id = give(world, max_uses=2)
    first = propose(world.ctx, actor_id="alice", spec_data=base_spec())
    assert first.status == "claimed"
    assert first.approval == {
        "kind": "grant",
        "approvers": [],
        "grant_id": grant_id,
        "use": 1,
        "max_uses": 2,
    }
    assert topics(store, standing_grant_record_id(grant_id)) == ["Registered", "Used"]
    attempt = store.get(ExecutionAttempt, first.attempt_id or "")
    assert attempt is not None and attempt.approval == first.approval
    assert [standing_grant_record_id(grant_id), 2] in [list(p) for p in attempt.authorized or []]
    assert propose(world.ctx, actor_id="alice", spec_data=base_spec()).approval["use"] == 2  # type: ignore[index]
    third = propose(world.ctx, actor_id="alice", spec_data=base_spec())
    assert third.status == "presented"  # spent: a person decides
    shown = grants.get(world.ctx, grant_id)
    assert (shown["uses"], shown["state"]) == (2, "spent")
    revoked = grants.revoke(world.ctx, grant_id=grant_id, grantor=ADMIN)
    assert revoked["state"] == "revoked"
    assert not store.read_stream(standing_grant_fence_id(grant_id, 0))  # no fences to make


def test_bounds_decide_what_a_grant_covers(world: World) -> None:
    give(
        world,
        destination="tasks",
        effect="create",
        conditions=[
            {"field": "minutes", "op": "lte", "value": 30},
            {"field": "list", "op": "in", "value": ["home", "work"]},
        ],
    )
    inside = {"minutes": 30, "list": "home"}
    for content, expected in (
        (inside, "claimed"),
        ({"minutes": 31, "list": "home"}, "presented"),
        ({"minutes": "30", "list": "home"}, "presented"),  # a string is not an integer
        ({"list": "home"}, "presented"),  # a missing field holds no condition
        ({"minutes": 5, "list": "garage"}, "presented"),
    ):
        result = propose(world.ctx, actor_id="alice", spec_data=base_spec(content=content))
        assert result.status == expected, content
    other = base_spec(content=inside, destination="notes")
    assert propose(world.ctx, actor_id="alice", spec_data=other).status == "presented"
    other = base_spec(content=inside, effect="update")
    assert propose(world.ctx, actor_id="alice", spec_data=other).status == "presented"


def test_an_expired_or_revoked_grant_approves_nothing(world: World) -> None:
    grant_id = give(world, expires_at=(world.clock.now() + timedelta(hours=1)).isoformat())
    world.clock.advance(3601)
    assert propose(world.ctx, actor_id="alice", spec_data=base_spec()).status == "presented"
    second = give(world)
    revoked = grants.revoke(world.ctx, grant_id=second, grantor=ADMIN)
    assert revoked["state"] == "revoked" and revoked["revoked_by"] == ADMIN.record()
    assert grants.revoke(world.ctx, grant_id=second, grantor=ADMIN) == revoked  # appends nothing
    assert propose(world.ctx, actor_id="alice", spec_data=base_spec()).status == "presented"
    assert grants.get(world.ctx, grant_id)["state"] == "expired"


def test_a_forbid_wins_over_a_grant_and_a_policy_approval_uses_no_grant(world: World) -> None:
    grant_id = give(world)
    view = apply(
        world,
        SMALL_TASKS + '@id("no-milk") forbid (principal, action, resource) '
        'when { context.content has title && context.content.title == "Buy milk" };',
    )
    with pytest.raises(PolicyDenied):
        propose(world.ctx, actor_id="alice", spec_data=base_spec(policy_digest=view.digest))
    by_policy = propose(
        world.ctx,
        actor_id="alice",
        spec_data=base_spec(policy_digest=view.digest, content={"minutes": 5}),
    )
    assert by_policy.approval is not None and by_policy.approval["kind"] == "policy"
    assert grants.get(world.ctx, grant_id)["uses"] == 0


def test_an_actor_grants_through_its_channel_and_only_for_itself(world: World) -> None:
    through = grants.Grantor("channel", "chat-backend", provenance=world.who)
    made = grants.grant(world.ctx, actor_id="alice", bounds=grant_bounds(world), grantor=through)
    assert made["granted_by"]["identity_binding_id"] == "ib1"
    with pytest.raises(StandingGrantRefused):
        grants.grant(world.ctx, actor_id="bob", bounds=grant_bounds(world), grantor=through)
    stranger = grants.Grantor(
        "channel", "chat-backend", provenance=Provenance("alice", "ib1", "cb1", "conv-2")
    )
    with pytest.raises(StandingGrantRefused):  # not alice's conversation binding
        grants.grant(world.ctx, actor_id="alice", bounds=grant_bounds(world), grantor=stranger)
    service = grants.Grantor("channel", "teams-svc", provenance=world.who, service_channel="teams")
    with pytest.raises(StandingGrantRefused):  # a service of another channel
        grants.grant(world.ctx, actor_id="alice", bounds=grant_bounds(world), grantor=service)
    with pytest.raises(NotFound):  # bob's channel cannot see or revoke alice's grant
        grants.revoke(world.ctx, grant_id=made["grant_id"], grantor=ADMIN, actor_id="bob")


def test_bad_bounds_are_refused_with_the_field_named(world: World) -> None:
    for bad, named in (
        ({"max_uses": 0}, "max_uses"),
        ({"expires_at": world.clock.now().isoformat()}, "expires_at"),
        ({"expires_at": (world.clock.now() + timedelta(days=400)).isoformat()}, "expires_at"),
        ({"conditions": [{"field": "minutes", "op": "lt", "value": "x"}]}, "conditions"),
        ({"capability": "Not A Name"}, "capability"),
    ):
        with pytest.raises(InvalidInput) as refused:
            give(world, **bad)
        assert named in refused.value.detail


def test_an_actor_holds_a_bounded_number_of_live_grants(world: World) -> None:
    first = give(world, max_uses=1)
    for _ in range(MAX_LIVE_GRANTS - 1):
        give(world)
    with pytest.raises(TooManyStandingGrants):
        give(world)
    propose(world.ctx, actor_id="alice", spec_data=base_spec())  # spends the first
    give(world)  # the spent one leaves the index
    listed = [g["grant_id"] for g in grants.list_grants(world.ctx, "alice")]
    assert first not in listed and len(listed) == MAX_LIVE_GRANTS
    record = world.store.get(DirectoryRecord, standing_grant_record_id(first))
    assert record is not None and record.kind is DirectoryKind.STANDING_GRANT  # still audited


def test_a_grant_revoked_before_dispatch_fails_its_attempt_safe(xworld: ExecutionWorld) -> None:
    grant_id = give(xworld)
    result = propose(
        xworld.ctx,
        actor_id="alice",
        spec_data=base_spec(content={"title": "Buy milk", "simulate": "success"}),
    )
    grants.revoke(xworld.ctx, grant_id=grant_id, grantor=ADMIN)
    xworld.worker().process(result.attempt_id or "")
    attempt = xworld.attempt(result.attempt_id or "")
    assert attempt.status is AttemptStatus.FAILED_SAFE
    assert (attempt.result or {})["reason_code"] == "standing_grant_revoked"
    assert xworld.calls_for(attempt.id) == 0


def test_a_grant_approved_attempt_runs_after_later_uses_moved_the_grant(
    xworld: ExecutionWorld,
) -> None:
    """The recheck pins the grant's version after the use; later uses move it on,
    which only sends the recheck to fresh reads."""
    give(xworld, max_uses=3)
    spec = base_spec(content={"title": "Buy milk", "simulate": "success"})
    first = propose(xworld.ctx, actor_id="alice", spec_data=spec)
    propose(xworld.ctx, actor_id="alice", spec_data=spec)
    xworld.worker().process(first.attempt_id or "")
    assert xworld.attempt(first.attempt_id or "").status is AttemptStatus.SUCCEEDED


def test_a_version_that_knows_no_use_shards_reads_a_sharded_grant_as_spent(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a version before use shards (one still running beside this one, or one
    rolled back to) makes of a grant made with them: it knows only its record's
    own count, which says no use is left there, so it never uses the grant and
    a person decides; this version uses it."""
    from domain import standing_grants
    from domain.services import automatic

    grant_id = give(world, max_uses=5)
    monkeypatch.setattr(automatic, "is_sharded", lambda grant: False)
    monkeypatch.setattr(standing_grants, "is_sharded", lambda grant: False)
    assert propose(world.ctx, actor_id="alice", spec_data=base_spec()).status == "presented"
    monkeypatch.undo()
    claimed = propose(world.ctx, actor_id="alice", spec_data=base_spec())
    assert claimed.approval is not None and claimed.approval["grant_id"] == grant_id
    assert grants.get(world.ctx, grant_id)["uses"] == 1
