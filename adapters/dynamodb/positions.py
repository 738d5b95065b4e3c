"""Subscriber positions on DynamoDB: one ``tracking#<subscriber>@<shard id>`` item
per subscriber and stream shard, written in the transaction of the view rows it
covers (``views.DynamoDBViewStore.put_views``) and only ever forward.

Shards roll every few hours, so each write gives the item the table's TTL
attribute ``TRACKING_TTL_SECONDS`` out. A position is only read for a shard the
stream still lists, and a shard is listed for about 24 hours after it closes;
a reader renews the positions of the shards it still lists every
``TRACKING_REFRESH_SECONDS`` (``renew_request``), so a position expires only
once nothing can read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import Tracking

from adapters.dynamodb import items as it

POSITION_DIGITS = 48  # stream sequence numbers have up to 40 digits
TRACKING_TTL_SECONDS = 7 * 86400
TRACKING_REFRESH_SECONDS = 86400


@dataclass(frozen=True)
class ShardTracking(Tracking):
    """A subscriber's position in one stream shard: ``application_name`` is
    ``<subscriber>@<shard id>``, ``notification_id`` the record's sequence number
    as an integer, and ``sequence_number`` its exact text (what the Streams
    API takes back to resume after it)."""

    sequence_number: str = ""


def shard_tracking_name(subscriber: str, shard_id: str) -> str:
    return f"{subscriber}@{shard_id}"


def position_key(application_name: str) -> dict[str, Any]:
    return {it.PK: {"S": it.TRACKING_PREFIX + application_name}, it.SK: {"N": "0"}}


def expiry(wall: float) -> dict[str, str]:
    """The TTL attribute's value for a position written (or renewed) at ``wall``."""
    return {"N": str(int(wall) + TRACKING_TTL_SECONDS)}


def position_put(table: str, tracking: Tracking, wall: float) -> dict[str, Any]:
    """The conditional put of one position: only over an older one."""
    position = f"{tracking.notification_id:0{POSITION_DIGITS}d}"
    sequence = getattr(tracking, "sequence_number", "") or str(tracking.notification_id)
    return {
        "TableName": table,
        "Item": {
            **position_key(tracking.application_name),
            "position": {"S": position},
            "sequence_number": {"S": sequence},
            it.TTL_ATTRIBUTE: expiry(wall),
        },
        "ConditionExpression": "attribute_not_exists(#pk) OR #p < :p",
        "ExpressionAttributeNames": {"#pk": it.PK, "#p": "position"},
        "ExpressionAttributeValues": {":p": {"S": position}},
    }


def renew_request(table: str, application_name: str, wall: float) -> dict[str, Any]:
    """An update of the expiry alone, of a position that exists (never a new one)."""
    return {
        "TableName": table,
        "Key": position_key(application_name),
        "UpdateExpression": "SET #t = :t",
        "ConditionExpression": "attribute_exists(#pk)",
        "ExpressionAttributeNames": {"#t": it.TTL_ATTRIBUTE, "#pk": it.PK},
        "ExpressionAttributeValues": {":t": expiry(wall)},
    }
