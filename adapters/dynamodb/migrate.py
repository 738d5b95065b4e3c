"""``ledger dynamodb migrate``: move a table to more head buckets, directory shards
and due buckets.

A table made before the layout record (16 head buckets, no shards, no due-bucket
count) or with fewer buckets or shards than asked keeps working throughout;
the migration never lowers a count. In three steps, each safe to interrupt and
to run again:

1. The layout record is written with the new counts and ``directory_checks``
   ``slot``: from now on every commit that changes a striped record writes all
   its copies (a process that had not seen the new record yet is refused by
   the layout check its commit carries, reads it and plans again), while every
   check still reads the record's own next slot. The due-bucket count takes
   effect here whole: every reader of due work reads the count as stored at
   each page, writers within a minute (their cached record), and a count only
   grows, so a reader enumerates every bucket any writer writes to. An entry
   written under the old count is in a bucket below it, which every larger
   count still enumerates; it moves to its new bucket on its next change.
2. Every striped directory record gets its copies at its newest version, in a
   transaction that also checks that version is still the newest (a record
   changed meanwhile is read again).
3. The layout record says ``shard``: checks read the copy of their shard.

A process that still holds the older record checks either its own next slot
(always right) or a copy it knows of (kept by every change since), so no
moment of the migration lets a changed record pass a check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from adapters.dynamodb import items as it
from adapters.dynamodb.client import DynamoDBUnavailableError, error_code
from adapters.dynamodb.layout import (
    DEFAULT_DIRECTORY_SHARDS,
    DEFAULT_DUE_BUCKETS,
    DEFAULT_HEAD_BUCKETS,
    DEFAULT_POLICY_SET_SHARDS,
    SETTING_DUE_BUCKETS_MAX,
    TableLayout,
    layout_item,
    layout_key,
    shard_item,
)
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from domain.errors import InvalidInput
from domain.standing_grants import DEFAULT_USE_SHARDS

log = logging.getLogger(__name__)

RECORD_ATTEMPTS = 8


@dataclass(frozen=True)
class MigrationReport:
    before: TableLayout
    after: TableLayout
    records_striped: int


def migrate(
    recorder: DynamoDBLedgerRecorder,
    *,
    head_buckets: int = DEFAULT_HEAD_BUCKETS,
    directory_shards: int = DEFAULT_DIRECTORY_SHARDS,
    policy_set_shards: int = DEFAULT_POLICY_SET_SHARDS,
    due_buckets: int = DEFAULT_DUE_BUCKETS,
    grant_shards: int = DEFAULT_USE_SHARDS,
    after_step: Callable[[int], None] | None = None,
) -> MigrationReport:
    """Move the table to at least ``head_buckets``, ``directory_shards``,
    ``policy_set_shards`` (0 shards: no copies, checks read each record's slot),
    ``due_buckets`` and ``grant_shards`` (use shards of new standing grants).

    ``after_step(n)`` runs after step n (tests stop or race a migration there)."""
    before = recorder.read_layout()
    if (
        head_buckets < before.head_buckets
        or directory_shards < before.directory_shards
        or policy_set_shards < before.policy_set_shards
        or due_buckets < before.due_buckets
        or grant_shards < before.grant_shards
    ):
        raise InvalidInput.at(
            "/layout",
            f"the table has {before.head_buckets} head buckets, "
            f"{before.directory_shards} directory shards, {before.policy_set_shards} "
            f"policy-set shards, {before.due_buckets} due buckets and "
            f"{before.grant_shards} grant use shards; a migration never lowers them",
            "argument",
        )
    if not before.due_buckets and due_buckets < SETTING_DUE_BUCKETS_MAX:
        # Each process wrote with its own LEDGER_DUE_WORK_BUCKETS, up to 256: a
        # smaller count would leave the entries of the higher buckets unread.
        raise InvalidInput.at(
            "/layout",
            "the table records no due-bucket count, so its entries may be in any of "
            f"{SETTING_DUE_BUCKETS_MAX} buckets; record at least {SETTING_DUE_BUCKETS_MAX}",
            "argument",
        )
    striping = directory_shards > 0 and policy_set_shards > 0
    try:
        target = TableLayout(
            head_buckets,
            directory_shards,
            striping,
            policy_set_shards=policy_set_shards,
            due_buckets=due_buckets,
            grant_shards=grant_shards,
        )
    except ValueError as exc:
        raise InvalidInput.at("/layout", str(exc), "argument") from None
    if not striping and (directory_shards or policy_set_shards):
        raise InvalidInput.at(
            "/layout", "directory and policy-set shards are both set or both 0", "argument"
        )
    adding_shards = (
        directory_shards > before.directory_shards
        or policy_set_shards > before.policy_set_shards
        or (striping and not before.checks_shards)
    )
    filling = TableLayout(
        head_buckets,
        directory_shards,
        checks_shards=before.checks_shards and not adding_shards,
        version=before.version + 1,
        policy_set_shards=policy_set_shards,
        due_buckets=due_buckets,
        grant_shards=grant_shards,
    )
    current = _write_layout(recorder, before, filling)
    _step(after_step, 1)
    striped = 0
    if adding_shards:
        for record_id in recorder.select_stream_ids():
            if it.is_striped(record_id):
                _stripe_record(recorder, record_id, target.shards_of(record_id))
                striped += 1
    _step(after_step, 2)
    if target.checks_shards and not current.checks_shards:
        done = replace(current, checks_shards=True, version=current.version + 1)
        current = _write_layout(recorder, current, done)
    _step(after_step, 3)
    recorder.forget_layout()
    log.info(
        "table %s: %s -> %s (%d records striped)", recorder.table_name, before, current, striped
    )
    return MigrationReport(before, current, striped)


def _step(after_step: Callable[[int], None] | None, number: int) -> None:
    if after_step is not None:
        after_step(number)


def _write_layout(
    recorder: DynamoDBLedgerRecorder, expected: TableLayout, new: TableLayout
) -> TableLayout:
    """Replace the layout record if it is still ``expected`` (two migrations at
    once: the second is refused instead of undoing the first's counts)."""
    if expected.version == 0:
        condition = "attribute_not_exists(#pk)"
        names: dict[str, str] = {"#pk": it.PK}
        values: dict[str, Any] = {}
    else:
        condition = "#lv = :lv"
        names = {"#lv": "layout_version"}
        values = {":lv": {"N": str(expected.version)}}
    request: dict[str, Any] = {
        "TableName": recorder.table_name,
        "Item": layout_item(new, it.now_text()),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
    }
    if values:
        request["ExpressionAttributeValues"] = values
    try:
        recorder.retrier.call(lambda: recorder.client.put_item(**request))
    except ClientError as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            raise InvalidInput.at(
                "/layout", "the table's layout changed meanwhile; run the migration again", "body"
            ) from None
        raise
    return new


def _stripe_record(recorder: DynamoDBLedgerRecorder, record_id: str, shards: int) -> None:
    """Write every copy of one record at its newest version, checked to be the newest."""
    for attempt in range(1, RECORD_ATTEMPTS + 1):
        newest = recorder.select_events(record_id, desc=True, limit=1)
        if not newest:
            return
        version = newest[0].originator_version
        at = it.now_text()
        actions: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": recorder.table_name,
                    "Item": shard_item(record_id, n, version, at),
                }
            }
            for n in range(shards)
        ]
        actions.append(
            {
                "ConditionCheck": {
                    "TableName": recorder.table_name,
                    "Key": it.event_key(record_id, version + 1),
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": it.PK},
                }
            }
        )
        try:
            recorder.retrier.call(
                lambda a=actions: recorder.client.transact_write_items(TransactItems=a)  # type: ignore[misc]
            )
            return
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if "ConditionalCheckFailed" in reasons:
                # Changed since it was read, which was after step 1: that change
                # passed the layout check at these counts, so it wrote every copy.
                return
            recorder.retrier.sleep(recorder.retrier.delay(attempt))  # a race: again
    raise DynamoDBUnavailableError(f"{record_id} kept changing while its copies were written")


__all__ = ["MigrationReport", "layout_key", "migrate"]
