"""Retention of delivered webhook records (design.md 5.10).

A delivered record keeps the body it sent (the redacted view as of its fact,
about a kilobyte) for ``LEDGER_WEBHOOK_RETENTION_SECONDS`` after its delivery;
then the housekeeping pass reduces it to a **tombstone**: the same row at the
next version, with its ids, type, subject, tries and times but no body, out of
every list. The fact itself stays in the log (its attempt's or proposal's
events), so nothing is lost that the audit shows.

The row is kept, not deleted, because it is what makes a delivery happen once:
the notifier writes a record at version 1 only where none exists, so a replay
of the log (a rebuilt position, a redelivered stream batch) finds the tombstone
and sends nothing again. A trimmed record cannot be redelivered (there is no
body to send); ``redeliver`` says so.

The pass reads the delivered list oldest fact first up to the cutoff (a range
read), so its cost is what it trims, and trims at most ``limit`` rows a pass;
each trim is a version-guarded write, so a redeliver racing it either wins (the
record is pending again) or finds the tombstone.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from domain.timeutil import format_utc, parse_utc
from projections.inbox import sort_time
from projections.ports import ViewRecord, ViewStore
from projections.webhooks import DELIVERY_VIEW, DeliveryStatus, delivery_list_key

DEFAULT_RETENTION_SECONDS = 7 * 86400
TRIM_LIMIT = 200
"""Rows one pass trims at most (the next pass goes on)."""
PAGE = 100
KEPT_FIELDS = (
    "delivery_id",
    "subscription_id",
    "notification_id",
    "type",
    "subject_id",
    "subject_version",
    "status",
    "attempts",
    "created_at",
    "delivered_at",
)
"""What a tombstone keeps: enough to say what was delivered when, no body."""


def is_trimmed(data: Mapping[str, Any]) -> bool:
    """The record was delivered and reduced to a tombstone after the retention."""
    return bool(data.get("trimmed_at"))


def tombstone(row: ViewRecord, now: datetime) -> ViewRecord:
    """The delivered record without its body, at the next version, in no list."""
    data = {key: row.data.get(key) for key in KEPT_FIELDS}
    data["trimmed_at"] = format_utc(now)
    return ViewRecord(name=DELIVERY_VIEW, key=row.key, version=row.version + 1, data=data)


def trim_delivered(
    views: ViewStore, now: datetime, retention_seconds: int, limit: int = TRIM_LIMIT
) -> int:
    """Reduce to tombstones at most ``limit`` delivered records whose delivery is
    older than the retention; returns how many were trimmed.

    The delivered list is ordered by the time of the fact, which is never later
    than the delivery: every record delivered before the cutoff is in the range
    read, and one delivered after it (a fact retried for long) is left for a
    later pass. At most ``4 * limit`` rows are read in one pass."""
    cutoff = now - timedelta(seconds=retention_seconds)
    until = f"{sort_time(cutoff)}#~"  # "~" sorts after every delivery id
    trimmed = read = 0
    cursor: str | None = None
    list_key = delivery_list_key(DeliveryStatus.DELIVERED.value)
    while trimmed < limit and read < 4 * limit:
        rows, cursor = views.list_views(list_key, PAGE, cursor, until=until)
        for row in rows:
            read += 1
            delivered = row.data.get("delivered_at") or row.data.get("updated_at")
            if row.data.get("status") != DeliveryStatus.DELIVERED.value or not delivered:
                continue
            if parse_utc(delivered) > cutoff:
                continue  # delivered late: its retention has not passed yet
            trimmed += views.put_view(tombstone(row, now))
            if trimmed >= limit:
                break
        if cursor is None:
            break
    return trimmed
