"""The DynamoDB view store under transient errors (ministack)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.dynamodb.client import Retrier
from adapters.dynamodb.views import DynamoDBViewStore
from domain.errors import StoreUnavailable
from projections.ports import ViewRecord
from tests.support.faults import LOST_RESPONSE, NOT_SENT, ScriptedFaultClient

pytestmark = pytest.mark.dynamodb


def record(version: int) -> ViewRecord:
    return ViewRecord(
        name="attempt_status",
        key="att_x",
        version=version,
        data={"status": "queued", "revision": version},
        list_pk="status#queued",
        list_sk=f"2026-11-29T12:00:0{version}Z#att_x",
    )


@pytest.fixture
def views(dynamodb_client: Any, dynamodb_table_name: str) -> tuple[DynamoDBViewStore, Any]:
    client = ScriptedFaultClient(dynamodb_client)
    store = DynamoDBViewStore(
        client, dynamodb_table_name, retrier=Retrier(max_attempts=3, sleep=lambda _: None)
    )
    return store, client


@pytest.mark.parametrize("fault", [NOT_SENT, LOST_RESPONSE])
def test_a_view_write_survives_one_ambiguous_request(
    views: tuple[DynamoDBViewStore, ScriptedFaultClient], fault: str
) -> None:
    """The view store sent its requests once, without the recorder's retries: a
    lost request or a lost response surfaced as a raw botocore error (a 500 on
    a status read, a projector step that failed). Now it is resent; a resend
    that finds its own first write reports it written."""
    store, client = views
    client.arm(fault, "put_item")
    assert store.put_view(record(1)) is True
    assert client.injected[("put_item", fault)] == 1
    stored = store.get_view("attempt_status", "att_x")
    assert stored is not None and stored.version == 1
    assert store.put_view(record(1)) is False  # a real repeat: not newer, nothing written
    assert store.put_view(record(2)) is True


def test_reads_are_retried_and_an_outage_is_store_unavailable(
    views: tuple[DynamoDBViewStore, ScriptedFaultClient],
) -> None:
    store, client = views
    store.put_view(record(1))
    client.arm(NOT_SENT, "get_item")
    assert store.get_view("attempt_status", "att_x") is not None
    client.arm(NOT_SENT, "query")
    rows, _ = store.list_views("status#queued", 10)
    assert [r.key for r in rows] == ["att_x"]
    client.arm(NOT_SENT, "get_item", count=3)
    with pytest.raises(StoreUnavailable):
        store.get_view("attempt_status", "att_x")
    client.arm(NOT_SENT, "put_item", count=3)
    with pytest.raises(StoreUnavailable):
        store.put_view(record(2))
    client.arm(LOST_RESPONSE, "put_item", count=3)  # the resends find the first write
    assert store.put_view(record(2)) is True
    assert client.pending == 1
