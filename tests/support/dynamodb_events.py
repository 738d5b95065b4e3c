"""Small builders shared by the DynamoDB integration tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from eventsourcing.persistence import StoredEvent

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def event(stream: str, version: int, state: bytes | None = None) -> StoredEvent:
    return StoredEvent(
        originator_id=stream,
        originator_version=version,
        topic="tests:Event",
        state=state if state is not None else f"{stream}@{version}".encode(),
    )


def new_stream(prefix: str = "stream") -> str:
    return f"{prefix}:{uuid.uuid4().hex[:12]}"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def existing(client: Any, table: str, keys: list[dict[str, Any]]) -> list[bool]:
    """Which of ``keys`` exist, in one BatchGetItem per 100 keys (strongly consistent)."""
    found: set[tuple[str, str]] = set()
    for start in range(0, len(keys), 100):
        pending: dict[str, Any] = {
            table: {
                "Keys": keys[start : start + 100],
                "ConsistentRead": True,
                "ProjectionExpression": "pk, sk",
            }
        }
        while pending:
            answer = client.batch_get_item(RequestItems=pending)
            for item in answer["Responses"].get(table, []):
                found.add((item["pk"]["S"], item["sk"]["N"]))
            pending = answer.get("UnprocessedKeys") or {}
    return [(k["pk"]["S"], k["sk"]["N"]) in found for k in keys]
