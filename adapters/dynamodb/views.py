"""DynamoDB view store: view rows are items in the ledger table.

``pk`` = ``view#<name>#<key>``, ``sk`` = 0; a conditional put refuses to replace
a newer ``view_version``; listed rows carry ``list_pk``/``list_sk`` and so
appear in the sparse ``list`` index (queried, never scanned).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from adapters.dynamodb import items as it
from projections.ports import ViewRecord

VIEW_PREFIX = "view#"


class DynamoDBViewStore:
    """Implements ``projections.ports.ViewStore`` on the ledger table."""

    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.table_name = table_name

    @staticmethod
    def _pk(name: str, key: str) -> str:
        return f"{VIEW_PREFIX}{name}#{key}"

    def get_view(self, name: str, key: str) -> ViewRecord | None:
        answer = self.client.get_item(
            TableName=self.table_name,
            Key={it.PK: {"S": self._pk(name, key)}, it.SK: {"N": "0"}},
            ConsistentRead=True,
        )
        item = answer.get("Item")
        return _record(item) if item else None

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        item: dict[str, Any] = {
            it.PK: {"S": self._pk(record.name, record.key)},
            it.SK: {"N": "0"},
            "view_name": {"S": record.name},
            "view_key": {"S": record.key},
            "view_version": {"N": str(record.version)},
            "data": {"S": json.dumps(dict(record.data), sort_keys=True, separators=(",", ":"))},
        }
        if record.list_pk and record.list_sk:
            item[it.LIST_PK] = {"S": record.list_pk}
            item[it.LIST_SK] = {"S": record.list_sk}
        request: dict[str, Any] = {"TableName": self.table_name, "Item": item}
        if not force:
            request["ConditionExpression"] = "attribute_not_exists(#pk) OR #v < :v"
            request["ExpressionAttributeNames"] = {"#pk": it.PK, "#v": "view_version"}
            request["ExpressionAttributeValues"] = {":v": {"N": str(record.version)}}
        try:
            self.client.put_item(**request)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        records: list[ViewRecord] = []
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": it.LIST_INDEX,
            "KeyConditionExpression": "#p = :p AND #s > :c",
            "ExpressionAttributeNames": {"#p": it.LIST_PK, "#s": it.LIST_SK},
            "ExpressionAttributeValues": {":p": {"S": list_pk}, ":c": {"S": cursor or " "}},
        }
        while len(records) <= limit:
            request["Limit"] = limit + 1 - len(records)
            answer = self.client.query(**request)
            records.extend(_record(item) for item in answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                break
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        page = records[:limit]
        return page, (page[-1].list_sk if len(records) > limit and page else None)


def _record(item: dict[str, Any]) -> ViewRecord:
    return ViewRecord(
        name=item["view_name"]["S"],
        key=item["view_key"]["S"],
        version=int(item["view_version"]["N"]),
        data=json.loads(item["data"]["S"]),
        list_pk=item.get(it.LIST_PK, {}).get("S"),
        list_sk=item.get(it.LIST_SK, {}).get("S"),
    )
