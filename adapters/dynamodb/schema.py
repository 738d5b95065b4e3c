"""The ledger table: its definition and :func:`create_table` (idempotent).

See docs/dynamodb.md, "DynamoDB table design", for why it looks like this.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from botocore.exceptions import ClientError

from adapters.dynamodb import items as it
from adapters.dynamodb.client import DynamoDBClient, DynamoDBUnavailableError, error_code
from adapters.dynamodb.layout import NEW_TABLE, TableLayout, layout_item

log = logging.getLogger(__name__)


def table_definition(table_name: str, *, kms_key_id: str | None = None) -> dict[str, Any]:
    """The ``CreateTable`` request: keys, the two GSIs, Streams and SSE."""
    sse: dict[str, Any] = {"Enabled": True, "SSEType": "KMS"}
    if kms_key_id:
        sse["KMSMasterKeyId"] = kms_key_id
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": it.PK, "AttributeType": "S"},
            {"AttributeName": it.SK, "AttributeType": "N"},
            {"AttributeName": it.DUE_BUCKET, "AttributeType": "S"},
            {"AttributeName": it.DUE_SK, "AttributeType": "S"},
            {"AttributeName": it.LIST_PK, "AttributeType": "S"},
            {"AttributeName": it.LIST_SK, "AttributeType": "S"},
        ],
        "KeySchema": [
            {"AttributeName": it.PK, "KeyType": "HASH"},
            {"AttributeName": it.SK, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": it.DUE_INDEX,
                "KeySchema": [
                    {"AttributeName": it.DUE_BUCKET, "KeyType": "HASH"},
                    {"AttributeName": it.DUE_SK, "KeyType": "RANGE"},
                ],
                "Projection": {
                    "ProjectionType": "INCLUDE",
                    "NonKeyAttributes": [it.ATTEMPT_ID, it.NEXT_ACTION_AT],
                },
            },
            {
                "IndexName": it.LIST_INDEX,
                "KeySchema": [
                    {"AttributeName": it.LIST_PK, "KeyType": "HASH"},
                    {"AttributeName": it.LIST_SK, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        "SSESpecification": sse,
    }


def create_table(
    client: DynamoDBClient,
    table_name: str,
    *,
    wait: bool = True,
    kms_key_id: str | None = None,
    timeout: float = 600.0,
    sleep: Callable[[float], None] = time.sleep,
    layout: TableLayout = NEW_TABLE,
) -> bool:
    """Create the ledger table; False when it already exists.

    A table this call creates gets its layout record (``layout``: 512 head
    buckets, 16 directory shards and 96 policy-set shards unless told otherwise) once it is active;
    a table that already existed keeps the one it has, or none (a table made
    before the record: ``ledger dynamodb migrate`` moves it on).

    With ``wait`` (the default) it then waits until the table and its indexes
    are ACTIVE and enables TTL and point-in-time recovery (also on a table that
    already existed, so an interrupted earlier run is completed). Without
    ``wait`` only ``CreateTable`` is sent; run it again with ``wait`` later.
    """
    try:
        client.create_table(**table_definition(table_name, kms_key_id=kms_key_id))
        created = True
        log.info("created DynamoDB table %s", table_name)
    except ClientError as exc:
        if error_code(exc) != "ResourceInUseException":
            raise
        created = False
        log.info("DynamoDB table %s already exists", table_name)
    if wait:
        wait_until_active(client, table_name, timeout=timeout, sleep=sleep)
        if created:
            write_first_layout(client, table_name, layout)
        enable_ttl(client, table_name)
        enable_point_in_time_recovery(client, table_name)
    return created


def write_first_layout(client: DynamoDBClient, table_name: str, layout: TableLayout) -> bool:
    """Record the layout of a new, empty table; False when it has one already."""
    first = replace(layout, version=1)
    try:
        client.put_item(
            TableName=table_name,
            Item=layout_item(first, it.now_text()),
            ConditionExpression="attribute_not_exists(#pk)",
            ExpressionAttributeNames={"#pk": it.PK},
        )
    except ClientError as exc:
        if error_code(exc) != "ConditionalCheckFailedException":
            raise
        return False
    return True


def wait_until_active(
    client: DynamoDBClient,
    table_name: str,
    *,
    timeout: float = 600.0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Poll ``DescribeTable`` until the table and every GSI are ACTIVE."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        table = client.describe_table(TableName=table_name)["Table"]
        indexes = table.get("GlobalSecondaryIndexes", [])
        if table.get("TableStatus") == "ACTIVE" and all(
            index.get("IndexStatus", "ACTIVE") == "ACTIVE" for index in indexes
        ):
            return
        if time.monotonic() >= deadline:
            raise DynamoDBUnavailableError(f"table {table_name} is not ACTIVE after {timeout}s")
        sleep(delay)
        delay = min(delay * 2, 5.0)


def enable_ttl(client: DynamoDBClient, table_name: str) -> bool:
    """Expire lookup items through ``expires_at_epoch``; True when now enabled."""
    try:
        current = client.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
        if current.get("TimeToLiveStatus") in {"ENABLED", "ENABLING"}:
            return True
        client.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": it.TTL_ATTRIBUTE},
        )
    except ClientError as exc:
        if "already enabled" in str(exc):
            return True
        log.warning("TTL not enabled on %s: %s", table_name, error_code(exc) or exc)
        return False
    return True


def enable_point_in_time_recovery(client: DynamoDBClient, table_name: str) -> bool:
    """Turn on PITR; an endpoint that does not support it is logged, not fatal."""
    try:
        client.update_continuous_backups(
            TableName=table_name,
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        )
    except ClientError as exc:
        log.warning(
            "point-in-time recovery not enabled on %s (the endpoint refused: %s); "
            "enable it on real DynamoDB",
            table_name,
            error_code(exc) or exc,
        )
        return False
    return True


def describe(client: DynamoDBClient, table_name: str) -> dict[str, Any]:
    """What the table has switched on: streams, SSE, TTL and PITR (for checks)."""
    table = client.describe_table(TableName=table_name)["Table"]
    ttl = client.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
    pitr: str
    try:
        backups = client.describe_continuous_backups(TableName=table_name)
        pitr = backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"][
            "PointInTimeRecoveryStatus"
        ]
    except ClientError:
        pitr = "UNSUPPORTED"
    return {
        "status": table.get("TableStatus"),
        "indexes": sorted(i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])),
        "stream_view_type": table.get("StreamSpecification", {}).get("StreamViewType"),
        "sse": table.get("SSEDescription", {}).get("Status"),
        "ttl_attribute": ttl.get("AttributeName")
        if ttl.get("TimeToLiveStatus") in {"ENABLED", "ENABLING"}
        else None,
        "pitr": pitr,
    }
