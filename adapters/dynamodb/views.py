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

import hashlib
import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from eventsourcing.persistence import IntegrityError, Tracking

from adapters.dynamodb import items as it
from adapters.dynamodb.client import (
    DynamoDBClient,
    DynamoDBUnavailableError,
    Retrier,
    error_code,
    is_transient,
    request_error,
)
from adapters.dynamodb.known_versions import KnownVersions
from adapters.dynamodb.positions import (
    ShardTracking,
    position_put,
    renew_request,
    shard_tracking_name,
)
from domain.errors import StoreUnavailable
from projections.ports import ViewRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import (
        AttributeValueTypeDef,
        PutTypeDef,
        TransactWriteItemTypeDef,
    )

T = TypeVar("T")
__all__ = ["DynamoDBViewStore", "ShardTracking", "shard_tracking_name"]

VIEW_PREFIX = "view#"
TRANSACTION_ITEMS = 100  # actions per atomic write (DynamoDB's bound per transaction)
REBUILD_ITEMS = TRANSACTION_ITEMS
BATCH_GET_KEYS = 100  # DynamoDB's bound per BatchGetItem
MAX_CONFLICT_ROUNDS = 8
MAX_UNPROCESSED_ROUNDS = 10


class _Condition(TypedDict):
    """The condition part of a write that must not replace a newer row."""

    ConditionExpression: str
    ExpressionAttributeNames: dict[str, str]
    ExpressionAttributeValues: dict[str, AttributeValueTypeDef]


class DynamoDBViewStore:
    """Implements ``projections.ports.ViewStore`` on the ledger table."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        retrier: Retrier | None = None,
        sleep: Callable[[float], None] = time.sleep,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.table_name = table_name
        self.retrier = retrier or Retrier()
        self.sleep = sleep
        self.wall = wall  # a position's TTL attribute: epoch seconds (positions.py)
        self.known = KnownVersions()  # rows put_views need not send again

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
        answer = self._call(
            lambda: self.client.get_item(
                TableName=self.table_name,
                Key={it.PK: {"S": self._pk(name, key)}, it.SK: {"N": "0"}},
                ConsistentRead=True,
            )
        )
        item = answer.get("Item")
        return _record(item) if item else None

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        item = self._view_item(record)
        request: dict[str, Any] = {"TableName": self.table_name, "Item": item}
        if not force:
            request.update(self._newer_than_stored(record))
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

    @staticmethod
    def _newer_than_stored(record: ViewRecord, *, or_same: bool = False) -> _Condition:
        return {
            "ConditionExpression": f"attribute_not_exists(#pk) OR #v {'<=' if or_same else '<'} :v",
            "ExpressionAttributeNames": {"#pk": it.PK, "#v": "view_version"},
            "ExpressionAttributeValues": {":v": {"N": str(record.version)}},
        }

    # -- rebuilds -------------------------------------------------------------------

    def get_views(self, name: str, keys: Sequence[str]) -> Mapping[str, ViewRecord]:
        """Consistent ``BatchGetItem`` reads of 100 keys each; unprocessed keys are
        asked again with a growing pause."""
        found: dict[str, ViewRecord] = {}
        for start in range(0, len(keys), BATCH_GET_KEYS):
            pending: dict[str, Any] = {
                self.table_name: {
                    "ConsistentRead": True,
                    "Keys": [
                        {it.PK: {"S": self._pk(name, k)}, it.SK: {"N": "0"}}
                        for k in dict.fromkeys(keys[start : start + BATCH_GET_KEYS])
                    ],
                }
            }
            for round_ in range(MAX_UNPROCESSED_ROUNDS):
                answer = self._call(
                    lambda p=pending: self.client.batch_get_item(  # type: ignore[misc]
                        RequestItems=p
                    )
                )
                for item in answer.get("Responses", {}).get(self.table_name, []):
                    record = _record(item)
                    found[record.key] = record
                pending = answer.get("UnprocessedKeys") or {}
                if not pending:
                    break
                self.sleep(min(0.05 * 2**round_, 1.0))
            else:
                raise StoreUnavailable()
        return found

    def replace_views(self, records: Sequence[ViewRecord], *, force: bool = False) -> int:
        """Rebuilt rows in ``TransactWriteItems`` of 100 conditional puts, each
        under the version guard (``force``: not newer). ``BatchWriteItem`` would
        take fewer capacity units but has no conditions, so it could put an
        older fold over a row the live projector wrote meanwhile; a refused row
        is dropped and the rest of its part sent again. Returns rows written."""
        rows = list(records)
        # A token of its own per call: an identical rebuild within DynamoDB's
        # 10-minute idempotency window must still write (a row forged meanwhile).
        nonce = secrets.token_hex(8)
        return sum(
            self._transact(rows[i : i + REBUILD_ITEMS], [], or_same=force, nonce=nonce)
            for i in range(0, len(rows), REBUILD_ITEMS)
        )

    # -- tracked writes (subscribers of the log) --------------------------------

    def put_views(self, records: Sequence[ViewRecord], tracking: Sequence[Tracking]) -> int:
        """Rows newer than the stored ones and the positions, in TransactWriteItems
        of at most ``TRANSACTION_ITEMS`` actions (a stream batch's rows go
        together: one request for up to 100 less the positions); the positions go
        with the last one, so a crash between two parts leaves the position
        behind (re-read, never skipped). A row refused by its version guard is
        dropped and the rest sent again; a refused position raises
        ``IntegrityError`` (someone got further). Two rows of one key (a
        transaction may touch an item once) leave the newer one."""
        newest: dict[tuple[str, str], ViewRecord] = {}
        for record in records:
            held = newest.get((record.name, record.key))
            if held is None or record.version >= held.version:
                newest[(record.name, record.key)] = record
        # A row the store is known to hold at its version or newer changes nothing.
        rows = [row for row in newest.values() if not self.known.holds(row)]
        if len(rows) == 1 and not tracking:
            # One row: a conditional PutItem, the same guard at half the write units.
            written = self.put_view(rows[0])
            self.known.remember(rows)  # written, or refused: stored at least that far
            return int(written)
        size = max(1, TRANSACTION_ITEMS - len(tracking))
        parts = [rows[i : i + size] for i in range(0, len(rows), size)]
        # A token of its own per call (a resend within it stays idempotent): a
        # redelivered batch must meet the version guard, not DynamoDB's replay
        # of the first answer, or rows it did not move would count as moved.
        nonce = secrets.token_hex(8)
        moved = 0
        for index, part in enumerate(parts or [[]]):
            last = index == max(len(parts), 1) - 1
            moved += self._transact(part, list(tracking) if last else [], nonce=nonce)
        return moved

    def _transact(
        self,
        rows: list[ViewRecord],
        tracking: list[Tracking],
        *,
        or_same: bool = False,
        nonce: str = "",
    ) -> int:
        for _ in range(MAX_CONFLICT_ROUNDS):
            actions: list[TransactWriteItemTypeDef] = [
                {"Put": self._newer_view_put(r, or_same=or_same)} for r in rows
            ]
            actions += [{"Put": self._tracking_put(t)} for t in tracking]
            if not actions:
                return 0
            token = hashlib.sha256(
                (nonce + json.dumps(actions, sort_keys=True)).encode()
            ).hexdigest()[:36]
            try:
                self.retrier.call(
                    partial(
                        self.client.transact_write_items,
                        TransactItems=actions,
                        ClientRequestToken=token,
                    ),
                    retry_if=_only_transaction_conflicts,
                )
                self.known.remember(rows)
                return len(rows)
            except (ClientError, BotoCoreError, DynamoDBUnavailableError) as exc:
                reasons = _reasons(exc)
                if not reasons:
                    raise self._mapped(exc) from exc
            refused = {i for i, code in enumerate(reasons) if code == "ConditionalCheckFailed"}
            if any(i >= len(rows) for i in refused):
                raise IntegrityError("a subscriber position is already further on")
            if not refused:
                continue  # a transaction race only: send the same again
            self.known.remember([r for i, r in enumerate(rows) if i in refused])
            rows = [r for i, r in enumerate(rows) if i not in refused]
        raise StoreUnavailable()

    def _mapped(self, exc: BaseException) -> Exception:
        if isinstance(exc, DynamoDBUnavailableError | BotoCoreError):
            return StoreUnavailable()
        mapped = request_error(exc)
        return StoreUnavailable() if isinstance(mapped, DynamoDBUnavailableError) else mapped

    def _newer_view_put(self, record: ViewRecord, *, or_same: bool = False) -> PutTypeDef:
        condition = self._newer_than_stored(record, or_same=or_same)
        return {
            "TableName": self.table_name,
            "Item": self._view_item(record),
            "ConditionExpression": condition["ConditionExpression"],
            "ExpressionAttributeNames": condition["ExpressionAttributeNames"],
            "ExpressionAttributeValues": condition["ExpressionAttributeValues"],
        }

    def _tracking_put(self, tracking: Tracking) -> PutTypeDef:
        put: PutTypeDef = position_put(self.table_name, tracking, self.wall())  # type: ignore[assignment]
        return put

    def _tracking_item(self, application_name: str) -> dict[str, Any] | None:
        answer = self._call(
            lambda: self.client.get_item(
                TableName=self.table_name,
                ConsistentRead=True,
                Key={it.PK: {"S": it.TRACKING_PREFIX + application_name}, it.SK: {"N": "0"}},
            )
        )
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def max_tracking_id(self, application_name: str) -> int | None:
        item = self._tracking_item(application_name)
        return int(item["position"]["S"]) if item else None

    def renew_tracking(self, application_names: Sequence[str]) -> int:
        """Push the expiry of these positions out again (those that exist; the
        position itself is left as it is); returns how many were renewed."""
        renewed = 0
        for name in application_names:
            request = renew_request(self.table_name, name, self.wall())
            try:
                self._call(lambda r=request: self.client.update_item(**r))  # type: ignore[misc]
                renewed += 1
            except ClientError:  # only ConditionalCheckFailed reaches here: none recorded
                continue
        return renewed

    def sequence_number(self, application_name: str) -> str | None:
        """The exact sequence number of a shard position (None when none is recorded)."""
        item = self._tracking_item(application_name)
        return str(item["sequence_number"]["S"]) if item else None

    def _view_item(self, record: ViewRecord) -> dict[str, Any]:
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
        return item

    def _stored(self, exc: ClientError, item: dict[str, Any]) -> Any:
        old = exc.response.get("Item")
        if old is not None:
            return old
        key = {it.PK: item[it.PK], it.SK: item[it.SK]}
        answer = self._call(
            lambda: self.client.get_item(TableName=self.table_name, Key=key, ConsistentRead=True)
        )
        return answer.get("Item")

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None, *, until: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        records: list[ViewRecord] = []
        start = cursor or " "
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": it.LIST_INDEX,
            "KeyConditionExpression": "#p = :p AND #s > :c",
            "ExpressionAttributeNames": {"#p": it.LIST_PK, "#s": it.LIST_SK},
            "ExpressionAttributeValues": {":p": {"S": list_pk}, ":c": {"S": start}},
        }
        if until is not None:
            # One condition per sort key: BETWEEN includes the cursor, dropped below.
            request["KeyConditionExpression"] = "#p = :p AND #s BETWEEN :c AND :u"
            request["ExpressionAttributeValues"][":u"] = {"S": until}
            if until < start:
                return [], None
        while len(records) <= limit:
            request["Limit"] = limit + 2 - len(records)
            answer = self._call(lambda: self.client.query(**request))
            records.extend(
                r for r in map(_record, answer.get("Items", [])) if (r.list_sk or "") > start
            )
            if "LastEvaluatedKey" not in answer:
                break
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        page = records[:limit]
        return page, (page[-1].list_sk if len(records) > limit and page else None)


def _reasons(exc: BaseException) -> list[str]:
    """The cancellation reasons of a cancelled transaction ([] for anything else)."""
    if not isinstance(exc, ClientError) or error_code(exc) != "TransactionCanceledException":
        return []
    return [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons", [])]


def _only_transaction_conflicts(exc: BaseException) -> bool:
    codes = {c for c in _reasons(exc) if c != "None"}
    return bool(codes) and codes <= {"TransactionConflict"}


def _record(item: dict[str, Any]) -> ViewRecord:
    return ViewRecord(
        name=item["view_name"]["S"],
        key=item["view_key"]["S"],
        version=int(item["view_version"]["N"]),
        data=json.loads(item["data"]["S"]),
        list_pk=item.get(it.LIST_PK, {}).get("S"),
        list_sk=item.get(it.LIST_SK, {}).get("S"),
    )
