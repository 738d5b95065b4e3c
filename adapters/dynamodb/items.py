"""How ledger records become DynamoDB items (and back).

One table holds everything; the partition key says what an item is:

- an event: ``pk`` = stream id, ``sk`` = version;
- a lookup: ``pk`` = ``lookup#<key>``, ``sk`` = 0;
- a due-work entry: ``pk`` = ``due#<attempt id>``, ``sk`` = 0, plus the
  ``due`` index keys (``due_bucket``, ``due_sk``);
- a directory record's shard copy: ``pk`` = ``<record id>#<n>``, ``sk`` = 0,
  ``version`` (``adapters.dynamodb.layout``);
- the table's layout record: ``pk`` = ``layout#table``, ``sk`` = 0;
- a stream head (the head index of audit digests): ``pk`` = ``head#<stream id>``,
  ``sk`` = 0, listed in the sparse ``list`` index under ``heads#<bucket>`` with
  the stream id as sort key, so a digest reads every head in stream-id order
  with a few queries and never touches the events.

Stream ids may not start with a reserved prefix, so an event can never land
on a lookup or due-work item.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import ProgrammingError, StoredEvent

from adapters.recorder import due_sort_key
from domain.directory import DirectoryKind
from domain.ports import DueWork, Lookup, StreamHead

PK = "pk"
SK = "sk"
TOPIC = "topic"
STATE = "state"
RECORDED_AT = "recorded_at"
VALUE = "value"
EXPIRES_AT = "expires_at"
TTL_ATTRIBUTE = "expires_at_epoch"
ATTEMPT_ID = "attempt_id"
NEXT_ACTION_AT = "next_action_at"
DUE_BUCKET = "due_bucket"
DUE_SK = "due_sk"
LIST_PK = "list_pk"
LIST_SK = "list_sk"

DUE_INDEX = "due"
LIST_INDEX = "list"

LOOKUP_PREFIX = "lookup#"
DUE_PREFIX = "due#"
HEAD_PREFIX = "head#"
HEADS_LIST_PREFIX = "heads#"
LAYOUT_PREFIX = "layout#"
STREAM_ID = "stream_id"
VERSION = "version"
CHAIN_HEAD = "chain_head"
SNAPSHOT_PREFIX = "snapshot#"
# view# holds projection rows (adapters/dynamodb/views.py); list# is kept free for lists.
TRACKING_PREFIX = "tracking#"

RESERVED_PREFIXES = (
    LOOKUP_PREFIX,
    DUE_PREFIX,
    SNAPSHOT_PREFIX,
    HEAD_PREFIX,
    HEADS_LIST_PREFIX,
    LAYOUT_PREFIX,
    "view#",
    "list#",
    TRACKING_PREFIX,
)

Item = dict[str, Any]


class ReservedStreamIdError(ProgrammingError):
    """A stream id starts with a prefix reserved for lookup or due-work items."""


def now_text() -> str:
    """The ``recorded_at`` value: UTC, microseconds, ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stream_pk(stream_id: object, prefix: str = "") -> str:
    """The partition key of a stream; refuses ids that could collide."""
    text = str(stream_id)
    if not text:
        raise ReservedStreamIdError("empty stream id")
    if text.startswith(RESERVED_PREFIXES):
        raise ReservedStreamIdError(f"stream ids may not start with {RESERVED_PREFIXES}")
    if is_shard_key(text):
        raise ReservedStreamIdError("a directory record id may not contain '#'")
    return prefix + text


SHARD_SEPARATOR = "#"

UNSTRIPED_KINDS = frozenset(
    {
        DirectoryKind.STANDING_GRANT,
        DirectoryKind.STANDING_GRANT_USES,
        DirectoryKind.STANDING_GRANT_FENCE,
    }
)
STRIPED_KINDS = frozenset(k.value for k in DirectoryKind if k not in UNSTRIPED_KINDS)
"""The directory kinds whose versions are copied over shards (``adapters.dynamodb.layout``):
every kind an approval or a dispatch marker checks and that changes only when
someone changes it. Standing grants are not: a grant made before use shards
counts each use on its own stream, and a grant with use shards is checked
through its fences, themselves spread (one per use shard, written once, by the
revocation); a use shard is appended to by each use it gives."""


def is_striped(stream_id: str) -> bool:
    """Whether the stream is a directory record whose versions are copied over shards."""
    kind, sep, _ = stream_id.partition(":")
    return bool(sep) and kind in STRIPED_KINDS


def is_shard_key(text: str) -> bool:
    """Whether a partition key is a shard copy (``<directory record id>#<n>``):
    directory record ids never contain ``#``, so no stream can be one."""
    kind, sep, rest = text.partition(":")
    return bool(sep) and kind in STRIPED_KINDS and SHARD_SEPARATOR in rest


def event_key(pk: str, version: int) -> Item:
    return {PK: {"S": pk}, SK: {"N": str(version)}}


def event_item(event: StoredEvent, pk: str, recorded_at: str) -> Item:
    """An event item: just the key, topic, state and when it was recorded."""
    return {
        **event_key(pk, event.originator_version),
        TOPIC: {"S": event.topic},
        STATE: {"B": bytes(event.state)},
        RECORDED_AT: {"S": recorded_at},
    }


def stored_event(item: Mapping[str, Any], originator_id: Any) -> StoredEvent:
    return StoredEvent(
        originator_id=originator_id,
        originator_version=int(item[SK]["N"]),
        topic=item[TOPIC]["S"],
        state=bytes(item[STATE]["B"]),
    )


def lookup_key(key: str) -> Item:
    return {PK: {"S": LOOKUP_PREFIX + key}, SK: {"N": "0"}}


def lookup_item(lookup: Lookup, recorded_at: str) -> Item:
    """A create-only lookup item; expiring ones carry the TTL attribute."""
    item: Item = {
        **lookup_key(lookup.key),
        VALUE: {"M": {k: {"S": str(v)} for k, v in lookup.value.items()}},
        RECORDED_AT: {"S": recorded_at},
    }
    if lookup.expires_at is not None:
        item[EXPIRES_AT] = {"S": utc_text(lookup.expires_at)}
        item[TTL_ATTRIBUTE] = {"N": str(int(lookup.expires_at.timestamp()))}
    return item


def lookup_value(item: Mapping[str, Any]) -> dict[str, str]:
    return {k: v["S"] for k, v in item.get(VALUE, {}).get("M", {}).items()}


def utc_text(moment: datetime) -> str:
    """A lookup's expiry as stored: ISO 8601 in UTC, which sorts as time does."""
    return moment.astimezone(UTC).isoformat()


def lookup_expired(item: Mapping[str, Any], now: datetime) -> bool:
    """The item has an expiry and it is not after ``now`` (TTL removes such items
    only within days of it, so a read judges it itself)."""
    expires = item.get(EXPIRES_AT, {}).get("S")
    return expires is not None and expires <= utc_text(now)


def due_bucket_name(number: int) -> str:
    """The due index partition ``due#00`` .. ``due#ff``, ``due#100`` and on above 256
    (the names are only ever compared whole)."""
    return f"{DUE_PREFIX}{number:02x}"


def due_bucket(attempt_id: str, buckets: int) -> str:
    """Stable bucket of an attempt: sha256 of its id, mod ``buckets``."""
    digest = hashlib.sha256(attempt_id.encode("utf-8")).digest()
    return due_bucket_name(int.from_bytes(digest[:8], "big") % buckets)


def due_key(attempt_id: str) -> Item:
    return {PK: {"S": DUE_PREFIX + attempt_id}, SK: {"N": "0"}}


def due_item(entry: DueWork, buckets: int, recorded_at: str) -> Item:
    assert entry.next_action_at is not None
    return {
        **due_key(entry.attempt_id),
        ATTEMPT_ID: {"S": entry.attempt_id},
        NEXT_ACTION_AT: {"S": entry.next_action_at.astimezone(UTC).isoformat()},
        DUE_BUCKET: {"S": due_bucket(entry.attempt_id, buckets)},
        DUE_SK: {"S": due_sort_key(entry)},
        RECORDED_AT: {"S": recorded_at},
    }


def due_entry(item: Mapping[str, Any]) -> tuple[str, DueWork]:
    """(sort key, entry) of a due index item."""
    return item[DUE_SK]["S"], DueWork(
        item[ATTEMPT_ID]["S"], datetime.fromisoformat(item[NEXT_ACTION_AT]["S"])
    )


def head_bucket_name(number: int) -> str:
    """A ``list`` index partition of the head index: ``heads#00``, ``heads#01``..."""
    return f"{HEADS_LIST_PREFIX}{number:02x}"


def head_bucket(stream_id: str, buckets: int) -> str:
    """The ``list`` index partition a new head of the stream goes to: sha256 of
    its id mod ``buckets`` (the table's layout record says how many)."""
    digest = hashlib.sha256(stream_id.encode("utf-8")).digest()
    return head_bucket_name(int.from_bytes(digest[:8], "big") % buckets)


def head_key(stream_id: str) -> Item:
    return {PK: {"S": HEAD_PREFIX + stream_id}, SK: {"N": "0"}}


def head_item(head: StreamHead, buckets: int, recorded_at: str) -> Item:
    """A stream's entry in the head index, as first written."""
    return {
        **head_key(head.stream_id),
        STREAM_ID: {"S": head.stream_id},
        VERSION: {"N": str(head.version)},
        CHAIN_HEAD: {"S": head.head},
        LIST_PK: {"S": head_bucket(head.stream_id, buckets)},
        LIST_SK: {"S": head.stream_id},
        RECORDED_AT: {"S": recorded_at},
    }


def head_update(head: StreamHead, buckets: int, recorded_at: str) -> dict[str, Any]:
    """The update each commit that moves a stream makes to its head entry: the
    version and chain head change, the bucket is kept (``if_not_exists``), so a
    head never moves between buckets when the table's bucket count grows."""
    return {
        "Key": head_key(head.stream_id),
        "UpdateExpression": (
            "SET #i = :i, #v = :v, #h = :h, #lsk = :i, #at = :at, #lpk = if_not_exists(#lpk, :lpk)"
        ),
        "ExpressionAttributeNames": {
            "#i": STREAM_ID,
            "#v": VERSION,
            "#h": CHAIN_HEAD,
            "#lsk": LIST_SK,
            "#lpk": LIST_PK,
            "#at": RECORDED_AT,
        },
        "ExpressionAttributeValues": {
            ":i": {"S": head.stream_id},
            ":v": {"N": str(head.version)},
            ":h": {"S": head.head},
            ":lpk": {"S": head_bucket(head.stream_id, buckets)},
            ":at": {"S": recorded_at},
        },
    }


def stream_head(item: Mapping[str, Any]) -> StreamHead:
    return StreamHead(item[STREAM_ID]["S"], int(item[VERSION]["N"]), item[CHAIN_HEAD]["S"])
