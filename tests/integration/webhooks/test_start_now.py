"""``start = "now"`` on memory, SQLite and DynamoDB: a new subscription is told
of the facts from when it first ran, never of the history before it (which a
``beginning`` subscription replays), and keeps that start across a restart.
On the embedded stores it also starts reading at the end of the log."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adapters.bootstrap import Ledger
from adapters.store import LedgerStore
from projections.webhooks import outstanding
from tests.support.subscribers import drain, restarted
from tests.support.webhooks import subscription, webhook_ledger
from tests.support.worlds.execution import ExecutionWorld


def succeeded(pworld: ExecutionWorld, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        attempt_id = pworld.approved("provider_idempotency")
        assert pworld.worker().process(attempt_id).value == "succeeded"
        ids.append(attempt_id)
    return ids


def subjects(ledger: Ledger, subscription_id: str) -> set[str]:
    assert ledger.views is not None
    return {
        r.data["subject_id"]
        for r in outstanding(ledger.views)
        if r.data["subscription_id"] == subscription_id
    }


def test_a_subscription_from_now_is_told_only_of_what_happens_after_it_started(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    before = succeeded(pworld, 3)
    pworld.clock.advance(1)  # the history is older than the subscription
    ledger = webhook_ledger(
        store,
        pworld,
        request,
        [
            subscription("http://r.invalid/all", "all"),
            replace(subscription("http://r.invalid/late", "late"), start="now"),
        ],
    )
    drain(ledger)
    assert subjects(ledger, "all") == set(before)
    assert subjects(ledger, "late") == set()
    assert ledger.backend is not None and ledger.views is not None
    if ledger.backend.kind != "dynamodb":  # it did not even read the history
        end = ledger.store.recorder.max_notification_id()  # type: ignore[attr-defined]
        assert ledger.views.max_tracking_id("webhook-late") == end

    pworld.clock.advance(1)
    after = succeeded(pworld, 2)
    drain(ledger)
    assert subjects(ledger, "late") == set(after)

    again = restarted(ledger)  # another process: the start recorded stays
    pworld.clock.advance(1)
    last = succeeded(pworld, 1)
    drain(again)
    assert subjects(again, "late") == {*after, *last}
    assert subjects(again, "all") == {*before, *after, *last}
