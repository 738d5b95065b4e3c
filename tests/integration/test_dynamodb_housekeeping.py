"""Bounded housekeeping on DynamoDB (the emulator): subscriber positions
(``tracking#`` items, one per subscriber and stream shard, a new one every few
hours as shards roll) carry the table's TTL attribute and are renewed while
their shard is still listed; nothing that must live for ever (events, heads,
views, due work, lookups without an expiry) carries it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from adapters.dynamodb import items as it
from adapters.dynamodb.positions import TRACKING_TTL_SECONDS
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.views import DynamoDBViewStore
from adapters.executors.fake import register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from tests.support.subscribers import drain
from tests.support.webhooks import subscription, webhook_ledger
from tests.support.worlds.execution import ExecutionWorld

pytestmark = pytest.mark.dynamodb

DAY = 86400


def every_item(client: Any, table: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": table}
    while True:
        page = client.scan(**request)
        found.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return found
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def expiry(item: dict[str, Any]) -> int:
    return int(item[it.TTL_ATTRIBUTE]["N"])


def test_positions_expire_and_nothing_that_must_last_does(
    dynamodb_recorder: DynamoDBLedgerRecorder,
    dynamodb_client: Any,
    dynamodb_table_name: str,
    request: pytest.FixtureRequest,
) -> None:
    store = LedgerStore(dynamodb_recorder)
    registry = StaticExecutorRegistry()
    pworld = ExecutionWorld(store, registry=registry, effects=register_fakes(registry))
    ledger = webhook_ledger(store, pworld, request, [subscription("http://r.invalid/chat")])
    for mode in ("provider_idempotency", "operator_reconciliation_only"):
        pworld.worker().process(pworld.approved(mode))
    began = int(time.time())
    drain(ledger)

    items = every_item(dynamodb_client, dynamodb_table_name)
    kinds = {str(i[it.PK]["S"]).split("#", 1)[0] + "#" for i in items if "#" in i[it.PK]["S"]}
    assert {"tracking#", "view#", "head#", "lookup#"} <= kinds
    expiring = [i for i in items if it.TTL_ATTRIBUTE in i]
    positions = [i for i in items if i[it.PK]["S"].startswith(it.TRACKING_PREFIX)]
    assert positions and all(it.TTL_ATTRIBUTE in i for i in positions)
    # only positions and lookups that expire: never an event, head, view or due entry
    assert {i[it.PK]["S"].split("#", 1)[0] for i in expiring} <= {"tracking", "lookup"}
    assert all(it.EXPIRES_AT in i for i in expiring if i[it.PK]["S"].startswith("lookup#"))
    subscribers = {i[it.PK]["S"].split("@", 1)[0] for i in positions}
    assert subscribers == {"tracking#status", "tracking#webhook-chat"}
    for position in positions:
        assert began + TRACKING_TTL_SECONDS - 5 <= expiry(position)
        assert expiry(position) <= int(time.time()) + TRACKING_TTL_SECONDS + 5

    # a reader renews the positions of the shards it still lists (here: days later)
    assert ledger.backend is not None
    reader: Any = ledger.backend.log_reader("status")
    views: DynamoDBViewStore = reader.views
    later = time.time() + 3 * DAY
    views.wall = lambda: later
    reader.renewed_at = None
    reader.reset()
    renewed = [
        i
        for i in every_item(dynamodb_client, dynamodb_table_name)
        if i[it.PK]["S"].startswith(it.TRACKING_PREFIX + "status@")
    ]
    assert renewed and all(expiry(i) >= int(later) + TRACKING_TTL_SECONDS - 5 for i in renewed)
    untouched = {i[it.PK]["S"]: i for i in positions if "webhook-chat@" in i[it.PK]["S"]}
    for item in every_item(dynamodb_client, dynamodb_table_name):
        if item[it.PK]["S"] in untouched:
            assert expiry(item) == expiry(untouched[item[it.PK]["S"]])
    # a renewal never makes a position that was not there
    assert views.renew_tracking(["nobody@shardId-0"]) == 0
    assert not any(
        i[it.PK]["S"] == it.TRACKING_PREFIX + "nobody@shardId-0"
        for i in every_item(dynamodb_client, dynamodb_table_name)
    )
