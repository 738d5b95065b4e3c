"""The table's layout record on the emulator: striped directory records, head
buckets that grow, and the migration of a table made before the record.

Tables made before the layout record are made here by deleting the record of a
new, empty table: what is left is exactly the older layout (16 head buckets,
no copies).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from adapters.dynamodb import items as it
from adapters.dynamodb.layout import LEGACY, NEW_TABLE, TableLayout, layout_key, shard_key
from adapters.dynamodb.migrate import migrate
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.schema import create_table
from adapters.recorder import StreamConflictError
from adapters.store import LedgerStore
from domain.directory import actor_record_id, executor_build_record_id
from domain.errors import InvalidInput
from domain.ports import ReadCheck, StreamHead
from domain.services import grants
from domain.services.proposals import propose
from tests.support.cli import invoke
from tests.support.dynamodb_events import event
from tests.support.dynamodb_fixtures import new_table_name
from tests.support.grant_checks import grant_violations
from tests.support.policies import grant_bounds
from tests.support.worlds.approval import World, base_spec

pytestmark = pytest.mark.dynamodb

BUILD = executor_build_record_id("tasks.write", "sha256:" + "b" * 64)
ACTOR = actor_record_id("alice")
HEAD = "sha256:" + "0" * 64


def append(recorder: DynamoDBLedgerRecorder, stream: str, version: int, **kwargs: Any) -> None:
    recorder.insert_events(
        [event(stream, version)], heads=[StreamHead(stream, version, HEAD)], **kwargs
    )


def copies(recorder: DynamoDBLedgerRecorder, record_id: str, shards: int) -> list[int | None]:
    """The version each shard copy of a record holds (None: no copy)."""
    found: list[int | None] = []
    for n in range(shards):
        item = recorder.client.get_item(
            TableName=recorder.table_name, Key=shard_key(record_id, n), ConsistentRead=True
        ).get("Item")
        found.append(None if item is None else int(item[it.VERSION]["N"]))
    return found


def seeds_for_every_shard(layout: TableLayout) -> dict[int, str]:
    seeds: dict[int, str] = {}
    n = 0
    while len(seeds) < layout.directory_shards:
        seeds.setdefault(layout.shard_for(f"att_{n}"), f"att_{n}")
        n += 1
    return seeds


def check_commit(recorder: DynamoDBLedgerRecorder, seed: str, record: str, version: int) -> None:
    """A commit that appends to its own stream and checks ``record`` at ``version``."""
    recorder.insert_events(
        [event(seed, 1)],
        read_checks=[ReadCheck(record, version)],
        heads=[StreamHead(seed, 1, HEAD)],
    )


@pytest.fixture
def legacy_table(dynamodb_client: Any) -> Iterator[str]:
    """A table without the layout record: what a table made before it looks like."""
    name = new_table_name()
    create_table(dynamodb_client, name)
    dynamodb_client.delete_item(TableName=name, Key=layout_key())
    yield name
    dynamodb_client.delete_table(TableName=name)


@pytest.fixture
def new_table(dynamodb_client: Any) -> Iterator[str]:
    """A table exactly as ``create_table`` makes it (the test fixtures record fewer
    due buckets)."""
    name = new_table_name()
    create_table(dynamodb_client, name)
    yield name
    dynamodb_client.delete_table(TableName=name)


def test_a_new_table_is_striped_and_a_change_is_caught_on_every_shard(
    dynamodb_client: Any, new_table: str, dynamodb_endpoint: str
) -> None:
    recorder = DynamoDBLedgerRecorder(new_table, dynamodb_client)
    assert recorder.layout == NEW_TABLE
    shown = invoke(
        ["dynamodb", "layout"],
        LEDGER_DYNAMODB_TABLE=recorder.table_name,
        AWS_ENDPOINT_URL_DYNAMODB=dynamodb_endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    assert shown.exit_code == 0, shown.stderr
    assert (
        "head buckets 512, directory shards 16, policy-set shards 96, due buckets 256, "
        "grant use shards 256, checks read shard copies"
    ) in shown.stdout
    seeds = seeds_for_every_shard(recorder.layout)
    with pytest.raises(StreamConflictError):  # absent: no copy says otherwise yet
        check_commit(recorder, "att_absent", BUILD, 1)
    append(recorder, BUILD, 1)
    assert copies(recorder, BUILD, 16) == [1] * 16
    with pytest.raises(StreamConflictError):  # created meanwhile: the absent check fails
        check_commit(recorder, seeds[0] + "x", BUILD, 0)
    append(recorder, BUILD, 2)  # withdrawn: every copy moves in the same transaction
    assert copies(recorder, BUILD, 16) == [2] * 16
    for shard, seed in seeds.items():
        with pytest.raises(StreamConflictError) as stale:
            check_commit(recorder, seed, BUILD, 1)
        assert stale.value.stream_id == BUILD, shard
    for seed in seeds.values():
        check_commit(recorder, seed, BUILD, 2)  # the version read now passes on every shard


def test_a_table_made_before_the_layout_keeps_working_and_migrates(
    dynamodb_client: Any, legacy_table: str, dynamodb_endpoint: str
) -> None:
    old = DynamoDBLedgerRecorder(legacy_table, dynamodb_client)
    assert old.layout == LEGACY
    append(old, ACTOR, 1)
    append(old, ACTOR, 2)
    append(old, "prop_old", 1)
    assert copies(old, ACTOR, 4) == [None] * 4  # no copies: checks read the slot
    with pytest.raises(StreamConflictError):
        check_commit(old, "att_1", ACTOR, 1)
    check_commit(old, "att_2", ACTOR, 2)
    old_bucket = {h.stream_id: h for h in old.select_heads()}
    assert set(old_bucket) == {ACTOR, "prop_old", "att_2"}

    ran = invoke(
        [
            "dynamodb",
            "migrate",
            "--head-buckets",
            "64",
            "--directory-shards",
            "8",
            "--policy-set-shards",
            "24",
        ],
        LEDGER_DYNAMODB_TABLE=legacy_table,
        AWS_ENDPOINT_URL_DYNAMODB=dynamodb_endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    assert ran.exit_code == 0, ran.stderr
    assert (
        "now: head buckets 64, directory shards 8, policy-set shards 24, due buckets 256, "
        "grant use shards 256, checks" in ran.stdout
    )
    assert "(1 directory records given their copies)" in ran.stdout

    new = DynamoDBLedgerRecorder(legacy_table, dynamodb_client)
    assert new.layout == TableLayout(
        64, 8, True, 2, policy_set_shards=24, due_buckets=256, grant_shards=256
    )
    assert copies(new, ACTOR, 8) == [2] * 8
    for seed in seeds_for_every_shard(new.layout).values():
        with pytest.raises(StreamConflictError):
            check_commit(new, seed + "-stale", ACTOR, 1)
        check_commit(new, seed, ACTOR, 2)
    # heads: an old head keeps its bucket when it moves on, a new one uses 64 buckets
    append(new, "prop_old", 2)
    bucket_of = {
        s: dynamodb_client.get_item(TableName=legacy_table, Key=it.head_key(s))["Item"][it.LIST_PK][
            "S"
        ]
        for s in ("prop_old", "att_2")
    }
    assert bucket_of["prop_old"] == it.head_bucket("prop_old", 16)
    wide = [f"prop_new{n}" for n in range(40)]
    for stream in wide:
        append(new, stream, 1)
    heads = {h.stream_id: h.version for h in new.select_heads()}
    assert heads["prop_old"] == 2 and set(wide) <= set(heads)
    assert len(heads) == 3 + 8 + 40  # every head, once, whatever bucket it is in
    assert any(it.head_bucket(s, 64) > "heads#0f" for s in wide)

    with pytest.raises(InvalidInput):  # never lowered
        migrate(new, head_buckets=16, directory_shards=8, policy_set_shards=24)
    again = migrate(
        new, head_buckets=64, directory_shards=8, policy_set_shards=24
    )  # running it again is harmless
    assert again.after.head_buckets == 64 and again.after.checks_shards


def test_a_process_that_has_not_seen_the_migration_still_writes_every_copy(
    dynamodb_client: Any, legacy_table: str
) -> None:
    stale = DynamoDBLedgerRecorder(legacy_table, dynamodb_client, layout_ttl=3600)
    append(stale, ACTOR, 1)
    assert stale.layout == LEGACY  # and it keeps it for an hour
    migrate(DynamoDBLedgerRecorder(legacy_table, dynamodb_client), directory_shards=4)
    append(stale, ACTOR, 2)  # its plan without copies is refused by the layout check
    assert stale.layout.directory_shards == 4  # read again and planned again
    assert copies(stale, ACTOR, 4) == [2] * 4
    fresh = DynamoDBLedgerRecorder(legacy_table, dynamodb_client)
    for seed in seeds_for_every_shard(fresh.layout).values():
        with pytest.raises(StreamConflictError):
            check_commit(fresh, seed, ACTOR, 1)


@pytest.mark.slow
def test_changes_racing_a_migration_leave_every_copy_at_the_newest_version(
    dynamodb_client: Any, legacy_table: str
) -> None:
    """Writers that change records throughout the migration, each holding the layout
    it read last: after it, every copy of every record holds the newest version."""
    records = [actor_record_id(f"u{n}") for n in range(6)]
    setup = DynamoDBLedgerRecorder(legacy_table, dynamodb_client)
    for record in records:
        append(setup, record, 1)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(mine: list[str]) -> None:
        recorder = DynamoDBLedgerRecorder(legacy_table, dynamodb_client, layout_ttl=3600)
        versions = dict.fromkeys(mine, 1)
        try:
            while not stop.is_set():
                for record in mine:
                    append(recorder, record, versions[record] + 1)
                    versions[record] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(records[n::3],)) for n in range(3)]
    for thread in threads:
        thread.start()
    try:
        migrate(DynamoDBLedgerRecorder(legacy_table, dynamodb_client), directory_shards=8)
        for _ in range(2):  # a little longer: writers that had the old layout move on
            append(setup, "prop_tick", len(setup.select_events("prop_tick")) + 1)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors
    for record in records:
        newest = setup.select_events(record, desc=True, limit=1)[0].originator_version
        assert newest > 1
        assert copies(setup, record, 8) == [newest] * 8, record


def test_grants_made_before_the_migration_keep_counting_on_their_record(
    dynamodb_client: Any, legacy_table: str
) -> None:
    """A table that records no grant shards makes grants that count their uses on
    their own record (what every older version reads and writes); after the
    migration new grants count on use shards, and the older grant keeps its way
    to its last use."""
    store = LedgerStore(DynamoDBLedgerRecorder(legacy_table, dynamodb_client))
    world = World(store)
    admin = grants.Grantor("admin", "ops")

    def give(max_uses: int) -> dict[str, Any]:
        bounds = grant_bounds(world, max_uses=max_uses)
        return grants.grant(world.ctx, actor_id="alice", bounds=bounds, grantor=admin)

    old = give(2)
    assert "use_shards" not in old
    first = propose(world.ctx, actor_id="alice", spec_data=base_spec())
    assert first.approval is not None and "shard" not in first.approval
    migrate(DynamoDBLedgerRecorder(legacy_table, dynamodb_client))
    store.recorder.forget_layout()  # what a running process does within a minute
    new = give(3)
    assert new["use_shards"] == 3
    uses = [propose(world.ctx, actor_id="alice", spec_data=base_spec()).approval for _ in range(5)]
    assert [u["grant_id"] for u in uses if u] == [old["grant_id"]] + [new["grant_id"]] * 3
    assert "shard" not in uses[0] and all("shard" in u for u in uses[1:4] if u)  # type: ignore[operator]
    assert uses[4] is None  # both spent: a person decides
    for made in (old, new):
        assert grant_violations(store, made["grant_id"]) == []
        assert grants.get(world.ctx, made["grant_id"])["state"] == "spent"
