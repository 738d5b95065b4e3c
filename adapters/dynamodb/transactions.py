"""The commit builder and writer: one conditional ``PutItem`` for a lone event,
otherwise one ``TransactWriteItems`` with a condition per event, a
``ConditionCheck`` per read-set entry, create-only lookups, due-work upserts
and one head-index item per stream that moves, sent with a
``ClientRequestToken`` so a resend can never apply twice. A lone event with
its head item is a transaction of two items.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError
from eventsourcing.persistence import StoredEvent

from adapters.dynamodb import items as it
from adapters.dynamodb.client import (
    DynamoDBClient,
    DynamoDBRequestError,
    DynamoDBUnavailableError,
    Retrier,
    error_code,
    is_transient,
    request_error,
)
from adapters.dynamodb.layout import (
    LEGACY,
    TableLayout,
    layout_unchanged_check,
    shard_item,
    shard_key,
)
from adapters.recorder import LookupConflictError, StreamConflictError
from domain.errors import CommitTooLarge
from domain.ports import DueWork, Lookup, ReadCheck, StreamHead

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import PutTypeDef, TransactWriteItemTypeDef

MAX_TRANSACTION_ITEMS = 100
TOKEN_LENGTH = 36  # DynamoDB's limit for ClientRequestToken
NOT_EXISTS = "attribute_not_exists(#pk)"
PK_NAME = {"#pk": it.PK}
RETRYABLE_REASONS = frozenset(
    {"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)


class LayoutChangedError(Exception):
    """The table's layout record no longer says what the commit was planned for
    (a migration added directory shards): read it again and plan again."""


@dataclass(frozen=True)
class Target:
    """What one transaction action touches, to name it when it fails."""

    kind: Literal["stream", "lookup", "due", "head", "shard", "layout"]
    name: str

    def conflict(self) -> StreamConflictError | LookupConflictError | None:
        if self.kind == "stream":
            return StreamConflictError(self.name)
        if self.kind == "lookup":
            return LookupConflictError(self.name)
        return None


@dataclass
class CommitPlan:
    """The actions of one commit, in the order the other backends check them
    (events, read set, lookups, due work), and their targets."""

    table_name: str
    actions: list[TransactWriteItemTypeDef] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    has_events: bool = False
    recorded_at: str = ""

    @property
    def single_put(self) -> PutTypeDef | None:
        """The one event item, when the commit is a single event and nothing else."""
        if len(self.actions) == 1 and self.has_events:
            return self.actions[0].get("Put")
        return None

    @property
    def first_stream(self) -> str | None:
        return next((t.name for t in self.targets if t.kind == "stream"), None)

    def token(self) -> str:
        """Deterministic ``ClientRequestToken``: sha256 of everything written.

        Every item carries ``recorded_at``, so two separate calls never share
        a token while the retries of one call always do. A commit without
        events (only lookups or due work) is also salted with a random nonce:
        an identical due-work change repeated within DynamoDB's ten-minute
        token window must apply again, not be answered from the cache.
        """
        body = json.dumps(
            {
                "actions": self.actions,
                "recorded_at": self.recorded_at,
                "nonce": "" if self.has_events else uuid.uuid4().hex,
            },
            sort_keys=True,
            separators=(",", ":"),
            default=_encode_bytes,
        )
        return hashlib.sha256(body.encode("utf-8")).hexdigest()[:TOKEN_LENGTH]


def _encode_bytes(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"cannot encode {type(value).__name__}")


def plan_commit(
    table_name: str,
    stored_events: Sequence[StoredEvent],
    read_checks: Sequence[ReadCheck] = (),
    lookups: Sequence[Lookup] = (),
    due: Sequence[DueWork] = (),
    heads: Sequence[StreamHead] = (),
    *,
    due_buckets: int,
    key_prefix: str = "",
    recorded_at: str | None = None,
    layout: TableLayout = LEGACY,
) -> CommitPlan:
    """Build the actions of a commit; refuse what DynamoDB would reject.

    With the table's ``layout`` (``adapters.dynamodb.layout``): a read check of
    a striped directory record checks the record's shard copy chosen by the
    commit's first stream id (once the layout checks shards), and an event of
    a striped record writes every copy and checks that the layout's shard
    count is still the one written for."""
    plan = CommitPlan(table_name, recorded_at=recorded_at or it.now_text())
    at = plan.recorded_at
    slots: set[tuple[str, int]] = set()
    striped: dict[str, int] = {}  # striped record -> the newest version this commit writes
    for event in stored_events:
        pk = it.stream_pk(event.originator_id, key_prefix)
        slot = (pk, event.originator_version)
        if slot in slots:  # the same slot twice can never commit
            raise StreamConflictError(str(event.originator_id))
        slots.add(slot)
        plan.has_events = True
        plan.actions.append(
            {
                "Put": {
                    "TableName": table_name,
                    "Item": it.event_item(event, pk, at),
                    "ConditionExpression": NOT_EXISTS,
                    "ExpressionAttributeNames": PK_NAME,
                }
            }
        )
        plan.targets.append(Target("stream", str(event.originator_id)))
        if not key_prefix and it.is_striped(pk):
            striped[pk] = max(striped.get(pk, 0), event.originator_version)
    seed = str(stored_events[0].originator_id) if stored_events else ""
    for check in read_checks:
        pk = it.stream_pk(check.stream_id, key_prefix)
        slot = (pk, check.version + 1)
        if slot in slots:  # an event of this commit already claims the slot
            continue
        slots.add(slot)
        # A record this commit also writes is checked at its event slot: its
        # copies are written here, and one transaction may not touch an item twice.
        if layout.checks_shards and not key_prefix and it.is_striped(pk) and pk not in striped:
            plan.actions.append(
                {"ConditionCheck": _shard_check(table_name, pk, layout.shard_for(seed, pk), check)}  # type: ignore[typeddict-item]
            )
            plan.targets.append(Target("stream", check.stream_id))
            continue
        plan.actions.append(
            {
                "ConditionCheck": {
                    "TableName": table_name,
                    "Key": it.event_key(pk, check.version + 1),
                    "ConditionExpression": NOT_EXISTS,
                    "ExpressionAttributeNames": PK_NAME,
                }
            }
        )
        plan.targets.append(Target("stream", check.stream_id))
    keys: set[str] = set()
    for lookup in lookups:
        if lookup.key in keys:
            raise LookupConflictError(lookup.key)
        keys.add(lookup.key)
        plan.actions.append({"Put": _lookup_put(table_name, lookup, at)})
        plan.targets.append(Target("lookup", lookup.key))
    latest: dict[str, DueWork] = {}
    for entry in due:  # the last change of an attempt wins, as in the other backends
        latest.pop(entry.attempt_id, None)
        latest[entry.attempt_id] = entry
    for entry in latest.values():
        action: TransactWriteItemTypeDef
        if entry.next_action_at is None:
            action = {"Delete": {"TableName": table_name, "Key": it.due_key(entry.attempt_id)}}
        else:
            action = {"Put": {"TableName": table_name, "Item": it.due_item(entry, due_buckets, at)}}
        plan.actions.append(action)
        plan.targets.append(Target("due", entry.attempt_id))
    latest_heads = {head.stream_id: head for head in heads}  # the last one of a stream wins
    for head in latest_heads.values():
        update = it.head_update(head, layout.head_buckets, at)
        plan.actions.append({"Update": {"TableName": table_name, **update}})  # type: ignore[typeddict-item]
        plan.targets.append(Target("head", head.stream_id))
    for record_id, version in striped.items():
        for shard in range(layout.shards_of(record_id)):
            item = shard_item(record_id, shard, version, at)
            plan.actions.append({"Put": {"TableName": table_name, "Item": item}})
            plan.targets.append(Target("shard", record_id))
    if striped:
        plan.actions.append({"ConditionCheck": layout_unchanged_check(table_name, layout)})  # type: ignore[typeddict-item]
        plan.targets.append(Target("layout", "table"))
    if len(plan.actions) > MAX_TRANSACTION_ITEMS:
        raise CommitTooLarge(
            f"The commit needs {len(plan.actions)} writes; "
            f"one atomic write allows {MAX_TRANSACTION_ITEMS}."
        )
    return plan


def _shard_check(table_name: str, pk: str, shard: int, check: ReadCheck) -> dict[str, Any]:
    """The record is still at the version read, as its shard copy says (absent: no copy)."""
    if check.version == 0:
        return {
            "TableName": table_name,
            "Key": shard_key(pk, shard),
            "ConditionExpression": NOT_EXISTS,
            "ExpressionAttributeNames": PK_NAME,
        }
    return {
        "TableName": table_name,
        "Key": shard_key(pk, shard),
        "ConditionExpression": "#v = :v",
        "ExpressionAttributeNames": {"#v": it.VERSION},
        "ExpressionAttributeValues": {":v": {"N": str(check.version)}},
    }


def _lookup_put(table_name: str, lookup: Lookup, at: str) -> PutTypeDef:
    """Create-only; with ``lookup.now``, an item of the key that had expired by
    then (TTL deletes it within days, not at once) gives way to the new one."""
    if lookup.now is None:
        return {
            "TableName": table_name,
            "Item": it.lookup_item(lookup, at),
            "ConditionExpression": NOT_EXISTS,
            "ExpressionAttributeNames": PK_NAME,
        }
    return {
        "TableName": table_name,
        "Item": it.lookup_item(lookup, at),
        "ConditionExpression": f"{NOT_EXISTS} OR #expires <= :now",
        "ExpressionAttributeNames": {**PK_NAME, "#expires": it.EXPIRES_AT},
        "ExpressionAttributeValues": {":now": {"S": it.utc_text(lookup.now)}},
    }


class CommitWriter:
    """Sends a :class:`CommitPlan` and maps DynamoDB's answer to recorder errors."""

    def __init__(self, client: DynamoDBClient, retrier: Retrier) -> None:
        self.client = client
        self.retrier = retrier

    def write(self, plan: CommitPlan) -> None:
        if not plan.actions:
            return
        put = plan.single_put
        try:
            if put is not None:
                self._put_item(plan, put)
            else:
                self._transact(plan)
        except (ClientError, BotoCoreError) as exc:
            raise request_error(exc) from exc

    # -- one event: a conditional PutItem ----------------------------------------

    def _put_item(self, plan: CommitPlan, put: PutTypeDef) -> None:
        maybe_applied = False

        def remember(exc: BaseException) -> None:
            nonlocal maybe_applied
            maybe_applied = maybe_applied or is_transient(exc)

        try:
            self.retrier.call(
                lambda: self.client.put_item(
                    TableName=put["TableName"],
                    Item=put["Item"],
                    ConditionExpression=put["ConditionExpression"],
                    ExpressionAttributeNames=put["ExpressionAttributeNames"],
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
                on_retry=remember,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            # A client configured with botocore retries may have resent it too.
            resent = exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
            # A resend after a timeout may find our own first attempt: it is
            # ours only if the stored item is identical, recorded_at included.
            if (maybe_applied or resent) and self._stored_item(put, exc) == put["Item"]:
                return
            raise StreamConflictError(plan.targets[0].name) from exc

    def _stored_item(self, put: PutTypeDef, exc: ClientError) -> Any:
        old = exc.response.get("Item")
        if old is not None:
            return old
        key = {k: put["Item"][k] for k in (it.PK, it.SK)}
        answer = self.retrier.call(
            lambda: self.client.get_item(TableName=put["TableName"], Key=key, ConsistentRead=True)
        )
        return answer.get("Item")

    # -- anything larger: one TransactWriteItems ----------------------------------

    def _transact(self, plan: CommitPlan) -> None:
        token = plan.token()  # the same token for every resend of this commit
        try:
            self.retrier.call(
                lambda: self.client.transact_write_items(
                    TransactItems=plan.actions, ClientRequestToken=token
                ),
                retry_if=lambda exc: self._cancel_is_transient(plan, exc),
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            raise self._cancellation_error(plan, exc) from exc

    @staticmethod
    def _reasons(exc: ClientError) -> list[str]:
        return [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons", [])]

    def _cancel_is_transient(self, plan: CommitPlan, exc: BaseException) -> bool:
        if not isinstance(exc, ClientError) or error_code(exc) != "TransactionCanceledException":
            return False
        codes = {c for c in self._reasons(exc) if c != "None"}
        if not codes:
            return False
        if codes <= RETRYABLE_REASONS:
            return True
        # A race with another transaction on a commit without streams (only
        # lookups / due work) is retried; with streams it is a lost race.
        return codes <= RETRYABLE_REASONS | {"TransactionConflict"} and plan.first_stream is None

    def _cancellation_error(self, plan: CommitPlan, exc: ClientError) -> Exception:
        reasons = self._reasons(exc)
        for target, code in zip(plan.targets, reasons, strict=False):
            if code == "ConditionalCheckFailed" and target.kind == "layout":
                return LayoutChangedError()
            if code == "ConditionalCheckFailed":
                conflict = target.conflict()
                if conflict is not None:
                    return conflict
        if "TransactionConflict" in reasons:
            racing = [
                t.name
                for t, code in zip(plan.targets, reasons, strict=False)
                if code == "TransactionConflict" and t.kind == "stream"
            ]
            stream = racing[0] if racing else plan.first_stream
            if stream is not None:
                return StreamConflictError(stream, "lost a transaction race")
        if "ValidationError" in reasons:
            return DynamoDBRequestError("DynamoDB rejected the transaction: ValidationError")
        return DynamoDBUnavailableError(
            "DynamoDB cancelled the transaction: " + ",".join(sorted(set(reasons)))
        )
