"""The commit plan and its token, without an endpoint."""

from __future__ import annotations

import pytest

from adapters.dynamodb.items import due_bucket
from adapters.dynamodb.transactions import plan_commit
from adapters.recorder import StreamConflictError
from domain.ports import DueWork, Lookup, ReadCheck
from tests.support.dynamodb_events import at, event

AT = "2026-11-29T12:00:00.000001Z"


def test_token_is_derived_from_what_is_written() -> None:
    events = [event("a", 1), event("b", 1)]
    first = plan_commit("t", events, [ReadCheck("c", 2)], due_buckets=16, recorded_at=AT)
    again = plan_commit("t", events, [ReadCheck("c", 2)], due_buckets=16, recorded_at=AT)
    assert first.token() == again.token() == first.token()
    assert len(first.token()) == 36
    other_state = plan_commit(
        "t",
        [event("a", 1, b"x"), event("b", 1)],
        [ReadCheck("c", 2)],
        due_buckets=16,
        recorded_at=AT,
    )
    later = plan_commit(
        "t", events, [ReadCheck("c", 2)], due_buckets=16, recorded_at="2026-11-29T12:00:00.000002Z"
    )
    assert len({first.token(), other_state.token(), later.token()}) == 3


def test_commits_without_events_never_share_a_token() -> None:
    due_only = plan_commit("t", [], due=[DueWork("att", None)], due_buckets=16, recorded_at=AT)
    assert due_only.token() != due_only.token()


def test_shape_of_a_plan() -> None:
    built = plan_commit(
        "t",
        [event("a", 2), event("a", 3)],
        [ReadCheck("a", 1), ReadCheck("b", 4), ReadCheck("b", 4)],
        [Lookup("k", {"v": "1"})],
        [DueWork("att", at(1)), DueWork("att", None)],
        due_buckets=16,
        recorded_at=AT,
    )
    kinds = [next(iter(action)) for action in built.actions]
    assert kinds == ["Put", "Put", "ConditionCheck", "Put", "Delete"]
    assert [(t.kind, t.name) for t in built.targets] == [
        ("stream", "a"),
        ("stream", "a"),
        ("stream", "b"),
        ("lookup", "k"),
        ("due", "att"),
    ]
    assert built.single_put is None
    single = plan_commit("t", [event("a", 1)], due_buckets=16, recorded_at=AT)
    assert single.single_put is not None


def test_same_slot_twice_is_refused() -> None:
    with pytest.raises(StreamConflictError):
        plan_commit("t", [event("a", 1), event("a", 1)], due_buckets=16)


def test_due_buckets_are_stable_and_spread() -> None:
    buckets = {due_bucket(f"att_{i}", 16) for i in range(400)}
    assert buckets == {f"due#{b:02x}" for b in range(16)}
    assert due_bucket("att_1", 16) == due_bucket("att_1", 16)
    assert due_bucket("att_1", 1) == "due#00"


def test_heads_ride_in_the_commit_and_count_toward_the_item_limit() -> None:
    from domain.errors import CommitTooLarge
    from domain.ports import StreamHead

    head = "sha256:" + "0" * 64
    built = plan_commit(
        "t", [event("a", 1)], heads=[StreamHead("a", 1, head)], due_buckets=16, recorded_at=AT
    )
    assert built.single_put is None  # a lone event with its head is a transaction
    update = built.actions[1]["Update"]
    assert update["Key"]["pk"] == {"S": "head#a"} and "ConditionExpression" not in update
    # the bucket is set only on the head's first write: a head never moves bucket
    assert "#lpk = if_not_exists(#lpk, :lpk)" in update["UpdateExpression"]
    assert update["ExpressionAttributeValues"][":lpk"]["S"].startswith("heads#")
    assert built.targets[1].kind == "head" and built.targets[1].conflict() is None
    twice = plan_commit(
        "t",
        [event("a", 1), event("a", 2)],
        heads=[StreamHead("a", 1, head), StreamHead("a", 2, head)],
        due_buckets=16,
        recorded_at=AT,
    )
    assert [a["Update"]["ExpressionAttributeValues"][":v"] for a in twice.actions[2:]] == [
        {"N": "2"}
    ]
    fifty = [event(f"s{n}", 1) for n in range(50)]
    plan_commit("t", fifty, heads=[StreamHead(f"s{n}", 1, head) for n in range(50)], due_buckets=16)
    with pytest.raises(CommitTooLarge):
        plan_commit(
            "t",
            [*fifty, event("s50", 1)],
            heads=[StreamHead(f"s{n}", 1, head) for n in range(51)],
            due_buckets=16,
        )


def test_head_prefixes_are_reserved_for_stream_ids() -> None:
    from adapters.dynamodb.items import ReservedStreamIdError, stream_pk

    for stream_id in ("head#x", "heads#00"):
        with pytest.raises(ReservedStreamIdError):
            stream_pk(stream_id)
