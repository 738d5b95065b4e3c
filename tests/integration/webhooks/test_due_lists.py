"""The due lists, on memory, SQLite and DynamoDB: records written before them are
moved in once with the order of their subject kept, and a record whose
subject's earlier fact is not acknowledged waits (moved to that one's next
try) instead of being read again on every pass."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import pytest

from adapters.store import LedgerStore
from adapters.webhooks.deliverer import BACKOFF_MAX_SECONDS, DELIVERY_VIEW
from domain.timeutil import format_utc, parse_utc
from projections.inbox import sort_time
from projections.ports import ViewRecord
from projections.webhooks import LEGACY_LIST_KEYS, delivery_list_key, delivery_row, due
from tests.support.webhooks import record, subscription, webhook_ledger
from tests.support.worlds.execution import ExecutionWorld


class Recording:
    """A receiver that answers ``status`` and remembers which records it was sent."""

    def __init__(self) -> None:
        self.status = 500
        self.sent: list[str] = []

    def post(self, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        self.sent.append(headers["webhook-id"])
        return self.status


def legacy_row(data: dict[str, object], version: int = 1) -> ViewRecord:
    """A record as the ledger listed it before the due lists (by the fact's time)."""
    status = str(data["status"])
    return ViewRecord(
        name=DELIVERY_VIEW,
        key=str(data["delivery_id"]),
        version=version,
        data=dict(data),
        list_pk=f"webhook#{status}",
        list_sk=f"{sort_time(str(data['created_at']))}#{data['delivery_id']}",
    )


def test_records_from_before_the_due_lists_are_moved_in_and_keep_their_order(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    ledger = webhook_ledger(store, pworld, request, [subscription("http://r.invalid/chat")])
    assert ledger.views is not None
    now = format_utc(pworld.clock.now())
    subject = "att_" + "7" * 64
    second = record(2, "pending", subject_id=subject, subject_version=9, next_try_at=now)
    first = record(1, "failing", subject_id=subject, subject_version=5, next_try_at=now)
    other = record(3, "pending", next_try_at=now)
    for data in (second, first, other):
        assert ledger.views.put_view(legacy_row(data))
    transport = Recording()
    deliverer = ledger.make_deliverer(transport=transport, random=lambda: 1.0)

    assert deliverer.run_lane("chat") == 0  # not in the due lists yet
    assert deliverer.adopt_legacy() == 3
    assert deliverer.adopt_legacy() == 0  # once
    for key in LEGACY_LIST_KEYS:
        assert ledger.views.list_views(key, 10)[0] == []
    moved = ledger.views.get_view(DELIVERY_VIEW, second["delivery_id"])
    assert moved is not None and moved.data["after"] == first["delivery_id"]
    assert moved.list_pk == delivery_list_key("pending")

    # the first fails: the second waits for it, moved to its next try
    assert deliverer.run_lane("chat") == 2
    assert transport.sent == [first["notification_id"], other["notification_id"]]
    failing = ledger.views.get_view(DELIVERY_VIEW, first["delivery_id"])
    waiting = ledger.views.get_view(DELIVERY_VIEW, second["delivery_id"])
    assert failing is not None and waiting is not None
    assert waiting.data["next_try_at"] == failing.data["next_try_at"]
    assert parse_utc(waiting.data["next_try_at"]) > pworld.clock.now()
    assert due(ledger.views, "chat", pworld.clock.now(), 100) == []  # nothing is read again

    transport.status = 204
    pworld.clock.advance(BACKOFF_MAX_SECONDS + 1)
    assert deliverer.run_lane("chat") >= 1
    deliverer.run_lane("chat")
    ours = [i for i in transport.sent[2:] if i != other["notification_id"]]
    assert ours == [first["notification_id"], second["notification_id"]]
    rows, _ = ledger.views.list_views(delivery_list_key("delivered"), 10)
    assert len(rows) == 3


def test_a_record_waiting_for_an_earlier_one_due_now_is_sent_right_after_it(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    """Both due in one pass, the later one listed first: it is skipped, the
    earlier one sent, and the next pass sends the later one."""
    ledger = webhook_ledger(store, pworld, request, [subscription("http://r.invalid/chat")])
    assert ledger.views is not None
    clock = pworld.clock.now()
    subject = "att_" + "8" * 64
    first = record(1, "pending", subject_id=subject, next_try_at=format_utc(clock))
    second = record(
        2,
        "pending",
        subject_id=subject,
        subject_version=7,
        next_try_at=format_utc(clock - timedelta(seconds=5)),
        after=first["delivery_id"],
    )
    for data in (first, second):
        ledger.views.put_view(delivery_row(data, 1))
    transport = Recording()
    transport.status = 204
    deliverer = ledger.make_deliverer(transport=transport)
    assert deliverer.run_lane("chat") == 1
    assert deliverer.run_lane("chat") == 1
    assert transport.sent == [first["notification_id"], second["notification_id"]]


def test_a_page_of_waiting_records_sends_their_earlier_facts_first(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    """Every record of the page waits for an earlier fact of its subject that is
    due too but listed after the page: the pass sends those earlier facts, and
    never stands still."""
    ledger = webhook_ledger(store, pworld, request, [subscription("http://r.invalid/chat")])
    assert ledger.views is not None
    clock = pworld.clock.now()
    earlier, later = format_utc(clock - timedelta(seconds=9)), format_utc(clock)
    firsts = []
    for n in range(3):
        subject = f"att_{n:064d}"
        first = record(10 + n, "failing", subject_id=subject, next_try_at=later)
        second = record(
            20 + n,
            "pending",
            subject_id=subject,
            subject_version=9,
            next_try_at=earlier,
            after=first["delivery_id"],
        )
        for data in (first, second):
            ledger.views.put_view(delivery_row(data, 1))
        firsts.append(first["notification_id"])
    transport = Recording()
    transport.status = 204
    deliverer = ledger.make_deliverer(transport=transport)
    assert deliverer.run_lane("chat", limit=2) == 2  # the page: two waiting records
    assert len(transport.sent) == 2 and set(transport.sent) <= set(firsts)  # earlier facts
    passes = 0
    while due(ledger.views, "chat", pworld.clock.now(), 100):
        passes += 1
        assert passes < 10
        deliverer.run_lane("chat", limit=2)
    assert len(transport.sent) == 6
    for n in range(3):  # each subject in order
        assert transport.sent.index(f"msg_{10 + n:040d}") < transport.sent.index(
            f"msg_{20 + n:040d}"
        )
