"""DynamoDB Streams record handling, shared by the local stream reader and the
AWS Lambda handler: which records are work, and for which attempt.

A record is only a hint. The worker re-reads the attempt's stream with a
consistent read before acting (a consumer never trusts one record as truth).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from domain.attempt import ExecutionAttempt
from domain.spec import ATTEMPT_ID_PREFIX
from projections.inbox import PROPOSAL_PREFIX

WORK_TOPICS = frozenset(
    {
        f"{ExecutionAttempt.__module__}:ExecutionAttempt.Queued",
        f"{ExecutionAttempt.__module__}:ExecutionAttempt.Requeued",
    }
)


class MalformedRecord(ValueError):
    """A stream record without the keys and attributes an event item has."""


def work_from_record(record: Mapping[str, Any]) -> str | None:
    """The attempt id a stream record asks the worker to process, or None.

    Raises MalformedRecord for a record that is not a well-formed item image.
    """
    if not isinstance(record, Mapping):
        raise MalformedRecord("record is not an object")
    if record.get("eventName") != "INSERT":
        return None
    dynamodb = record.get("dynamodb")
    if not isinstance(dynamodb, Mapping):
        raise MalformedRecord("record has no dynamodb section")
    image = dynamodb.get("NewImage")
    if not isinstance(image, Mapping):
        raise MalformedRecord("record has no NewImage")
    try:
        pk = image["pk"]["S"]
        topic = image.get("topic", {}).get("S")
    except (KeyError, TypeError, AttributeError) as exc:
        raise MalformedRecord("record image lacks pk") from exc
    if not isinstance(pk, str):
        raise MalformedRecord("record pk is not a string")
    if topic in WORK_TOPICS:
        return pk
    return None


def work_from_records(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Attempt ids to process, in order, without duplicates within the batch."""
    seen: dict[str, None] = {}
    for record in records:
        try:
            attempt_id = work_from_record(record)
        except MalformedRecord:
            continue
        if attempt_id is not None:
            seen.setdefault(attempt_id, None)
    return list(seen)


def attempt_streams_from_records(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every attempt and proposal stream a batch of stream records touched (for
    the projector: status views and the inbox)."""
    found: dict[str, None] = {}
    for record in records:
        image = record.get("dynamodb", {}).get("NewImage", {})
        pk = image.get("pk", {}).get("S") if isinstance(image, dict) else None
        if (
            isinstance(pk, str)
            and pk.startswith((ATTEMPT_ID_PREFIX, PROPOSAL_PREFIX))
            and "topic" in image
        ):
            found.setdefault(pk, None)
    return list(found)
