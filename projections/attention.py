"""Derived entries of the attention list: attempts that wait, with no status of their own.

``outcome_unknown``, ``effect_after_no_effect`` and ``failed_safe`` are lists
of their own (``status#<status>``). An attempt that waits for a worker with
its build has no status of its own: it is ``queued``, and a worker leases only
attempts whose exact build it hosts (I11). So ``waiting_for_build`` is derived
when it is read, from the ``status#queued`` list (oldest change first): the
queued attempts whose view has not changed for longer than
``LEDGER_WAITING_FOR_BUILD_SECONDS``, that is, that no worker hosting their
build has taken for that long (none runs, none hosts the build, or all are
busy). Nothing is written for it, so the status view keeps its shape, a
rebuild has nothing to fold, and an attempt leaves the entry the moment a
worker leases it. The reading costs the waiting rows plus one page.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from enum import StrEnum

from domain.attempt import AttemptStatus
from domain.timeutil import parse_utc
from projections.ports import ViewRecord, ViewStore
from projections.status import status_list_key

QUEUED_LIST = status_list_key(AttemptStatus.QUEUED.value)
# A list sorts by the text of ``updated_at``, whose fractional seconds are
# written only when present: within one second the text order can differ from
# the time order, so a reader stops one second past the cutoff, not at it.
ORDER_SLACK = timedelta(seconds=1)
PAGE = 200


class AttentionReason(StrEnum):
    """A derived attention entry: listed like a status, never stored as one."""

    WAITING_FOR_BUILD = "waiting_for_build"


def waiting_for_build(
    views: ViewStore,
    now: datetime,
    threshold_seconds: float,
    limit: int,
    cursor: str | None = None,
) -> tuple[Sequence[ViewRecord], str | None]:
    """A page of queued attempts unchanged for longer than ``threshold_seconds``,
    oldest first, and the cursor of the next page (None at the end)."""
    cutoff = now - timedelta(seconds=threshold_seconds)
    found: list[ViewRecord] = []
    while True:
        page, next_cursor = views.list_views(QUEUED_LIST, PAGE, cursor)
        for row in page:
            changed = parse_utc(str(row.data["updated_at"]))
            if changed > cutoff + ORDER_SLACK:
                return found, None
            if changed <= cutoff:
                if len(found) == limit:
                    return found, found[-1].list_sk
                found.append(row)
        if next_cursor is None:
            return found, None
        cursor = next_cursor


def is_waiting_for_build(
    status: str, updated_at: str | None, now: datetime, threshold_seconds: float
) -> bool:
    """One attempt's membership of the entry, by the rule the list reads with:
    queued, and unchanged for longer than ``threshold_seconds``."""
    if status != AttemptStatus.QUEUED.value or not updated_at:
        return False
    return parse_utc(updated_at) <= now - timedelta(seconds=threshold_seconds)


def count_waiting_for_build(
    views: ViewStore, now: datetime, threshold_seconds: float, *, cap: int = 10_000
) -> int:
    """How many attempts wait for a worker with their build (at most ``cap``)."""
    total, cursor = 0, None
    while total < cap:
        rows, cursor = waiting_for_build(
            views, now, threshold_seconds, min(PAGE, cap - total), cursor
        )
        total += len(rows)
        if cursor is None:
            break
    return total
