"""DynamoDB view store: view rows are items in the ledger table.

``pk`` = ``view#<name>#<key>``, ``sk`` = 0; a conditional put refuses to replace
a newer ``view_version``; listed rows carry ``list_pk``/``list_sk`` and so
appear in the sparse ``list`` index (queried, never scanned).

Requests go through the recorder's :class:`~adapters.dynamodb.client.Retrier`:
a lost request or a lost response is resent, and a conditional put whose
resend finds its own first write (the same item) counts as written. When the
retries are spent the caller gets ``StoreUnavailable``, never a botocore error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from adapters.dynamodb import items as it
from adapters.dynamodb.client import (
    DynamoDBUnavailableError,
    Retrier,
    error_code,
    is_transient,
    request_error,
)
from domain.errors import StoreUnavailable
from projections.ports import ViewRecord

T = TypeVar("T")

VIEW_PREFIX = "view#"


class DynamoDBViewStore:
    """Implements ``projections.ports.ViewStore`` on the ledger table."""

    def __init__(self, client: Any, table_name: str, *, retrier: Retrier | None = None) -> None:
        self.client = client
        self.table_name = table_name
        self.retrier = retrier or Retrier()

    def _call(
        self, operation: Callable[[], T], on_retry: Callable[[BaseException], None] | None = None
    ) -> T:
        try:
            return self.retrier.call(operation, on_retry=on_retry)
        except DynamoDBUnavailableError as exc:
            raise StoreUnavailable() from exc
        except BotoCoreError as exc:
            raise StoreUnavailable() from exc
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise
            mapped = request_error(exc)
            if isinstance(mapped, DynamoDBUnavailableError):
                raise StoreUnavailable() from exc
            raise mapped from exc

    @staticmethod
    def _pk(name: str, key: str) -> str:
        return f"{VIEW_PREFIX}{name}#{key}"

    def get_view(self, name: str, key: str) -> ViewRecord | None:
        answer = self._call(lambda: self.client.get_item(
            TableName=self.table_name,
            Key={it.PK: {"S": self._pk(name, key)}, it.SK: {"N": "0"}},
            ConsistentRead=True,
        ))
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
            request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        maybe_applied = False

        def remember(exc: BaseException) -> None:
            nonlocal maybe_applied
            maybe_applied = maybe_applied or is_transient(exc)

        try:
            self._call(lambda: self.client.put_item(**request), on_retry=remember)
        except ClientError as exc:  # only ConditionalCheckFailed reaches here
            # A resend after a lost response may find our own first write.
            return maybe_applied and self._stored(exc, item) == item
        return True

    def _stored(self, exc: ClientError, item: dict[str, Any]) -> Any:
        old = exc.response.get("Item")
        if old is not None:
            return old
        key = {it.PK: item[it.PK], it.SK: item[it.SK]}
        answer = self._call(lambda: self.client.get_item(
            TableName=self.table_name, Key=key, ConsistentRead=True))
        return answer.get("Item")

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
            answer = self._call(lambda: self.client.query(**request))
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
