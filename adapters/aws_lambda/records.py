"""Which stream a DynamoDB stream record names (the local stream reader's rule)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.streams import MalformedRecord, attempt_streams_from_records


def stream_id_from_record(record: Any) -> str | None:
    """The attempt or proposal stream a record changed, or None for anything else.

    The choice is the local stream reader's (``attempt_streams_from_records``);
    a record without a table key to name raises MalformedRecord.
    """
    if not isinstance(record, Mapping):
        raise MalformedRecord("record is not an object")
    dynamodb = record.get("dynamodb")
    if not isinstance(dynamodb, Mapping):
        raise MalformedRecord("record has no dynamodb section")
    keys = dynamodb.get("Keys")
    pk = keys.get("pk") if isinstance(keys, Mapping) else None
    if not isinstance(pk, Mapping) or not isinstance(pk.get("S"), str) or not pk["S"]:
        raise MalformedRecord("record has no pk")
    found = attempt_streams_from_records([dict(record)])
    return found[0] if found else None
