"""Striped directory records and head buckets in the commit plan, without an endpoint."""

from __future__ import annotations

from collections import Counter

import pytest

from adapters.dynamodb import items as it
from adapters.dynamodb.layout import LEGACY, NEW_TABLE, TableLayout
from adapters.dynamodb.transactions import MAX_TRANSACTION_ITEMS, plan_commit
from domain.directory import (
    actor_record_id,
    executor_build_record_id,
    grant_record_id,
    standing_grant_fence_id,
    standing_grant_record_id,
    standing_grant_uses_id,
)
from domain.errors import CommitTooLarge
from domain.ports import ReadCheck, StreamHead
from domain.standing_grants import MAX_FENCES
from tests.support.dynamodb_events import event

AT = "2026-11-29T12:00:00.000001Z"
BUILD = executor_build_record_id("tasks.write", "sha256:" + "a" * 64)
HEAD = "sha256:" + "0" * 64


def checked_keys(plan: object) -> list[str]:
    return [a["ConditionCheck"]["Key"]["pk"]["S"] for a in plan.actions if "ConditionCheck" in a]  # type: ignore[attr-defined]


def test_a_striped_check_reads_the_copy_of_the_commits_own_shard() -> None:
    shards = Counter()
    for n in range(400):
        plan = plan_commit(
            "t", [event(f"att_{n}", 1)], [ReadCheck(BUILD, 3)], due_buckets=16, layout=NEW_TABLE
        )
        (key,) = checked_keys(plan)
        record, _, shard = key.rpartition("#")
        assert record == BUILD
        assert key == f"{BUILD}#{NEW_TABLE.shard_for(f'att_{n}', BUILD):02d}"
        check = plan.actions[1]["ConditionCheck"]
        assert check["ConditionExpression"] == "#v = :v"
        assert check["ExpressionAttributeValues"] == {":v": {"N": "3"}}
        assert plan.targets[1].conflict() is not None  # a failure names the record
        shards[shard] += 1
    # every shard takes a share: no copy is checked by every attempt
    assert len(shards) == NEW_TABLE.directory_shards
    assert max(shards.values()) < 400 / NEW_TABLE.directory_shards * 2


def test_an_absent_record_is_checked_absent_on_its_copy_and_a_legacy_table_checks_the_slot() -> (
    None
):
    absent = plan_commit(
        "t", [event("att_1", 1)], [ReadCheck(BUILD, 0)], due_buckets=16, layout=NEW_TABLE
    )
    assert absent.actions[1]["ConditionCheck"]["ConditionExpression"] == "attribute_not_exists(#pk)"
    assert checked_keys(absent)[0].startswith(BUILD + "#")
    legacy = plan_commit(
        "t", [event("att_1", 1)], [ReadCheck(BUILD, 3)], due_buckets=16, layout=LEGACY
    )
    assert legacy.actions[1]["ConditionCheck"]["Key"] == it.event_key(BUILD, 4)
    filling = TableLayout(512, 16, checks_shards=False, version=2, policy_set_shards=96)
    during = plan_commit(
        "t", [event("att_1", 1)], [ReadCheck(BUILD, 3)], due_buckets=16, layout=filling
    )
    assert during.actions[1]["ConditionCheck"]["Key"] == it.event_key(BUILD, 4)


def test_a_change_of_a_striped_record_writes_every_copy_and_checks_the_layout() -> None:
    plan = plan_commit(
        "t",
        [event(BUILD, 4)],
        heads=[StreamHead(BUILD, 4, HEAD)],
        due_buckets=16,
        layout=NEW_TABLE,
        recorded_at=AT,
    )
    copies = [
        a["Put"]["Item"] for a in plan.actions if "Put" in a and "#" in a["Put"]["Item"]["pk"]["S"]
    ]
    assert [c["pk"]["S"] for c in copies] == [f"{BUILD}#{n:02d}" for n in range(16)]
    assert {c[it.VERSION]["N"] for c in copies} == {"4"}
    layout_check = plan.actions[-1]["ConditionCheck"]
    assert layout_check["Key"]["pk"]["S"] == "layout#table"
    assert layout_check["ExpressionAttributeValues"] == {":s": {"N": "16"}, ":p": {"N": "96"}}
    assert len(plan.actions) == 1 + 1 + 16 + 1  # the event, its head, the copies, the layout
    # a table before the layout record: no copies, but the layout must still be absent
    legacy = plan_commit("t", [event(BUILD, 4)], heads=[StreamHead(BUILD, 4, HEAD)], due_buckets=16)
    assert len(legacy.actions) == 3
    assert "attribute_not_exists" in legacy.actions[-1]["ConditionCheck"]["ConditionExpression"]


def action_keys(plan: object) -> list[tuple[str, str]]:
    """The (pk, sk) of every action: DynamoDB refuses a transaction naming one twice."""
    keys = []
    for action in plan.actions:  # type: ignore[attr-defined]
        (body,) = action.values()
        key = body.get("Key") or body["Item"]
        keys.append((key["pk"]["S"], str(key.get("sk", {}))))
    return keys


@pytest.mark.parametrize("written", [1, 4, 5])
def test_a_commit_that_writes_and_checks_one_striped_record_names_each_item_once(
    written: int,
) -> None:
    # A commit that read the build at version 3 and writes an event of it (the
    # slot it read, a taken one, or one ahead): its copies are written, so the
    # check goes to the record's event slot, never to a copy the commit also puts.
    plan = plan_commit(
        "t",
        [event(BUILD, written)],
        [ReadCheck(BUILD, 3)],
        heads=[StreamHead(BUILD, written, HEAD)],
        due_buckets=16,
        layout=NEW_TABLE,
    )
    keys = action_keys(plan)
    assert len(keys) == len(set(keys)), Counter(keys).most_common(2)
    assert not any(k.startswith(BUILD + "#") for k in checked_keys(plan))
    if written != 4:  # the slot after the version read is checked empty
        assert {"ConditionCheck": plan.actions[1]["ConditionCheck"]} in plan.actions
        assert plan.actions[1]["ConditionCheck"]["Key"] == it.event_key(BUILD, 4)


def test_the_policy_set_has_its_own_copies_and_its_change_fits_one_transaction() -> None:
    policy = "policy-set:default"
    change = plan_commit(
        "t",
        [event(policy, 3)],
        heads=[StreamHead(policy, 3, HEAD)],
        due_buckets=16,
        layout=NEW_TABLE,
    )
    assert len(change.actions) == 1 + 1 + 96 + 1 == 99 <= MAX_TRANSACTION_ITEMS
    shards = {
        checked_keys(
            plan_commit(
                "t",
                [event(f"att_{n}", 1)],
                [ReadCheck(policy, 3)],
                due_buckets=16,
                layout=NEW_TABLE,
            )
        )[0]
        for n in range(3000)
    }
    assert len(shards) == 96  # every attempt of the table checks it: 96 partitions share it


def test_a_standing_grant_is_not_striped_and_its_use_writes_no_copies() -> None:
    grant = standing_grant_record_id("sg_1")
    used = plan_commit(
        "t", [event(grant, 5)], [ReadCheck(grant, 4)], due_buckets=16, layout=NEW_TABLE
    )
    assert len(used.actions) == 1  # the event alone; its own slot covers the check
    check = plan_commit(
        "t", [event("att_1", 1)], [ReadCheck(grant, 4)], due_buckets=16, layout=NEW_TABLE
    )
    assert checked_keys(check) == [grant]


def test_the_largest_quorum_claim_fits_in_one_transaction_on_a_striped_table() -> None:
    """domain.quorum's count: 2 events, 2 heads, 1 due entry, 5 checks of the
    requesting side and 3 per voter (actor, identity and channel binding) for 30
    voters: 100 items. Striping changes which item a check reads, never how many."""
    from domain.ports import DueWork
    from domain.quorum import MAX_QUORUM
    from tests.support.dynamodb_events import at

    checks = [
        ReadCheck(actor_record_id("req"), 1),
        ReadCheck(grant_record_id("req", "tasks.write"), 1),
        ReadCheck(BUILD, 2),
        ReadCheck("policy-set:default", 3),
        ReadCheck("target:t1", 1),
    ]
    for v in range(MAX_QUORUM):
        checks += [
            ReadCheck(actor_record_id(f"a{v}"), 1),
            ReadCheck(f"identity-binding:ib{v}", 1),
            ReadCheck(f"channel-binding:cb{v}", 1),
        ]
    events = [event("prop_1", 4), event("att_1", 1)]
    heads = [StreamHead("prop_1", 4, HEAD), StreamHead("att_1", 1, HEAD)]
    due = [DueWork("att_1", at(0))]
    striped = plan_commit(
        "t", events, checks, due=due, heads=heads, due_buckets=16, layout=NEW_TABLE
    )
    legacy = plan_commit("t", events, checks, due=due, heads=heads, due_buckets=16, layout=LEGACY)
    assert len(striped.actions) == len(legacy.actions) == MAX_TRANSACTION_ITEMS
    assert all("#" in k for k in checked_keys(striped))  # every check on a copy


def test_heads_go_to_the_layouts_buckets_and_keep_the_bucket_they_were_first_written_to() -> None:
    wide = TableLayout(512, 0, False, 1)
    buckets = {it.head_bucket(f"att_{n}", 512) for n in range(5000)}
    assert len(buckets) == 512 and "heads#1ff" in buckets
    plan = plan_commit(
        "t", [event("att_1", 1)], heads=[StreamHead("att_1", 1, HEAD)], due_buckets=16, layout=wide
    )
    update = plan.actions[1]["Update"]
    assert update["ExpressionAttributeValues"][":lpk"]["S"] == it.head_bucket("att_1", 512)
    assert "if_not_exists(#lpk, :lpk)" in update["UpdateExpression"]


@pytest.mark.parametrize("stream_id", ["actor:alice#03", "executor-build:x:sha#0", "layout#table"])
def test_shard_and_layout_keys_are_never_stream_ids(stream_id: str) -> None:
    with pytest.raises(it.ReservedStreamIdError):
        it.stream_pk(stream_id)
    assert it.stream_pk("standing-grant:sg#1")  # not striped: no copy can collide


def test_a_layout_out_of_bounds_is_refused() -> None:
    for bad in (
        {"head_buckets": 0},
        {"head_buckets": 4097},
        {"directory_shards": 33},
        {"policy_set_shards": 97},
        {"policy_set_shards": 0},
    ):
        kwargs = {
            "head_buckets": 16,
            "directory_shards": 4,
            "checks_shards": True,
            "policy_set_shards": 4,
            **bad,
        }
        with pytest.raises(ValueError):
            TableLayout(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TableLayout(16, 0, checks_shards=True)


def test_a_grant_use_appends_to_its_shard_and_checks_its_fence_neither_striped() -> None:
    """A claim by a grant with use shards: the shard's first use registers it and
    counts one (two events of one stream, one head), the fence of that shard is
    checked absent on its own slot (never copied: each fence is already one of a
    grant's many), and every item is named once."""
    shard = standing_grant_uses_id("sgr_1", 7)
    fence = standing_grant_fence_id("sgr_1", 7)
    events = [
        event("prop_1", 1),
        event("prop_1", 2),
        event("att_1", 1),
        event(shard, 1),
        event(shard, 2),
    ]
    heads = [
        StreamHead("prop_1", 2, HEAD),
        StreamHead("att_1", 1, HEAD),
        StreamHead(shard, 2, HEAD),
    ]
    checks = [
        ReadCheck(actor_record_id("alice"), 1),
        ReadCheck(grant_record_id("alice", "tasks.write"), 1),
        ReadCheck(BUILD, 2),
        ReadCheck("policy-set:default", 3),
        ReadCheck("target:t1", 1),
        ReadCheck(fence, 0),
    ]
    from domain.ports import DueWork
    from tests.support.dynamodb_events import at

    plan = plan_commit(
        "t",
        events,
        checks,
        due=[DueWork("att_1", at(0))],
        heads=heads,
        due_buckets=256,
        layout=NEW_TABLE,
    )
    keys = action_keys(plan)
    assert len(keys) == len(set(keys)) == 5 + 6 + 1 + 3
    assert it.event_key(fence, 1) in [
        a["ConditionCheck"]["Key"] for a in plan.actions if "ConditionCheck" in a
    ]
    assert not any(k.startswith((shard + "#", fence + "#")) for k, _ in keys)  # no copies
    marker = plan_commit(
        "t", [event("att_1", 3)], [ReadCheck(fence, 0)], due_buckets=256, layout=NEW_TABLE
    )
    assert checked_keys(marker) == [fence]


def test_the_largest_revocation_of_a_grant_fits_one_transaction() -> None:
    """A revocation makes every fence of a grant in its own commit: the record's event
    and head, a fence and its head per fence (at most MAX_FENCES), and the three
    provenance checks of a channel's revocation: 99 items, each named once."""
    record = standing_grant_record_id("sgr_1")
    fences = [standing_grant_fence_id("sgr_1", n) for n in range(MAX_FENCES)]
    events = [event(record, 2)] + [event(f, 1) for f in fences]
    heads = [StreamHead(s, 1, HEAD) for s in fences] + [StreamHead(record, 2, HEAD)]
    checks = [
        ReadCheck(actor_record_id("alice"), 1),
        ReadCheck("identity-binding:ib1", 1),
        ReadCheck("channel-binding:cb1", 1),
    ]
    plan = plan_commit("t", events, checks, heads=heads, due_buckets=256, layout=NEW_TABLE)
    keys = action_keys(plan)
    assert len(keys) == len(set(keys)) == 2 * (1 + MAX_FENCES) + 3 == 99
    with pytest.raises(CommitTooLarge):  # one fence more would not fit
        more = standing_grant_fence_id("sgr_1", MAX_FENCES)
        plan_commit(
            "t",
            [*events, event(more, 1)],
            checks,
            heads=[*heads, StreamHead(more, 1, HEAD)],
            due_buckets=256,
            layout=NEW_TABLE,
        )
