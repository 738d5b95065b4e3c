"""Retention of delivered webhook records (issue 26, finding 6), on memory, SQLite
and DynamoDB: a record delivered longer ago than LEDGER_WEBHOOK_RETENTION_SECONDS
becomes a tombstone without its body, out of the delivered list; its fact stays
in the log; a replay of the log sends nothing again; a redeliver says it was
trimmed. Outstanding records and recent deliveries are never trimmed.

Before: every delivered record kept its whole body (about 1 KB) for good.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.bootstrap import Ledger
from adapters.housekeeping import housekeeping_pass
from adapters.store import LedgerStore
from adapters.webhooks.deliverer import Deliverer, DeliveryTrimmed, redeliver
from projections.webhook_retention import KEPT_FIELDS, TRIM_LIMIT, tombstone, trim_delivered
from projections.webhooks import DELIVERY_VIEW, delivery_list_key, outstanding
from tests.support.subscribers import drain
from tests.support.webhooks import subscription, webhook_ledger
from tests.support.worlds.execution import ExecutionWorld

RETENTION = 7 * 86400


class Accepting:
    """A receiver that acknowledges every send (no network)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def post(self, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        self.sent.append(headers["webhook-id"])
        return 204


def delivered(ledger: Ledger) -> list[str]:
    assert ledger.views is not None
    rows, _ = ledger.views.list_views(delivery_list_key("delivered"), 500)
    return [row.key for row in rows]


def succeeded(pworld: ExecutionWorld, count: int) -> list[str]:
    found = []
    for _ in range(count):
        attempt_id = pworld.approved("provider_idempotency")
        pworld.worker().process(attempt_id)
        found.append(attempt_id)
    return found


def send_all(ledger: Ledger, deliverer: Deliverer) -> None:
    assert ledger.views is not None
    for _ in range(10):
        if not outstanding(ledger.views):
            return
        deliverer.run_once()
    raise AssertionError("deliveries still outstanding")


def test_delivered_records_are_trimmed_after_the_retention_and_never_sent_again(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    ledger = webhook_ledger(store, pworld, request, [subscription("https://hooks.example/x")])
    views = ledger.views
    assert views is not None
    attempts = succeeded(pworld, 3)
    drain(ledger)
    transport = Accepting()
    deliverer = ledger.make_deliverer(transport=transport, random=lambda: 0.5)
    send_all(ledger, deliverer)
    ids = delivered(ledger)
    assert len(ids) == 3 and len(transport.sent) == 3
    events_before = {a: len(store.read_stream(a)) for a in attempts}

    pworld.clock.advance(RETENTION - 1)
    assert housekeeping_pass(ledger).trimmed == 0  # kept for the whole retention
    pworld.clock.advance(1)
    assert housekeeping_pass(ledger).trimmed == 3
    assert housekeeping_pass(ledger).trimmed == 0

    assert delivered(ledger) == []
    for ident in ids:
        row = views.get_view(DELIVERY_VIEW, ident)
        assert row is not None and "body" not in row.data
        assert set(row.data) == {*KEPT_FIELDS, "trimmed_at"}
        assert row.data["status"] == "delivered" and row.list_pk is None
        with pytest.raises(DeliveryTrimmed, match="trimmed after the retention"):
            redeliver(views, ident, ledger.clock)
    # the facts stay in the log
    assert {a: len(store.read_stream(a)) for a in attempts} == events_before
    # a replay of the log (a rebuilt position, a stream batch seen again) adds nothing
    (notifier,) = ledger.webhook_notifiers()
    assert not any(views.put_view(row) for row in notifier.records(attempts))
    assert outstanding(views) == []
    deliverer.run_once()
    assert len(transport.sent) == 3


def test_outstanding_and_recent_deliveries_are_not_trimmed(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    ledger = webhook_ledger(store, pworld, request, [subscription("https://hooks.example/x")])
    views = ledger.views
    assert views is not None
    succeeded(pworld, 2)
    drain(ledger)
    pworld.clock.advance(RETENTION + 60)  # the facts are old; their deliveries are not
    first, _ = sorted(outstanding(views), key=lambda row: row.key)
    transport = Accepting()
    deliverer = ledger.make_deliverer(transport=transport, random=lambda: 0.5)
    assert deliverer.deliver(first, ledger.webhooks[0])  # an old fact, delivered now
    assert housekeeping_pass(ledger).trimmed == 0  # one just delivered, one outstanding
    assert len(outstanding(views)) == 1
    send_all(ledger, deliverer)
    pworld.clock.advance(RETENTION)
    assert housekeeping_pass(ledger).trimmed == 2


def test_a_pass_trims_a_bounded_batch(
    store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest
) -> None:
    ledger = webhook_ledger(store, pworld, request, [subscription("https://hooks.example/x")])
    assert ledger.views is not None
    succeeded(pworld, 5)
    drain(ledger)
    send_all(ledger, ledger.make_deliverer(transport=Accepting(), random=lambda: 0.5))
    later = ledger.clock.now() + timedelta(seconds=RETENTION)
    assert trim_delivered(ledger.views, later, RETENTION, limit=2) == 2
    assert trim_delivered(ledger.views, later, RETENTION, limit=TRIM_LIMIT) == 3
    assert delivered(ledger) == []


def test_ledger_webhooks_redeliver_of_a_trimmed_record_says_so_in_one_line(
    tmp_path: Path, hermetic_env: None
) -> None:
    from adapters.bootstrap import build_ledger
    from adapters.settings import load_settings
    from tests.support.cli import assert_one_line_failure, invoke
    from tests.support.webhooks import seed

    path = str(tmp_path / "ledger.db")
    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=path))
    try:
        assert ledger.views is not None
        *_, kept, trimmed = seed(ledger, failing=1, delivered=2)
        row = ledger.views.get_view(DELIVERY_VIEW, trimmed)
        assert row is not None
        ledger.views.put_view(tombstone(row, ledger.clock.now()))
    finally:
        ledger.close()
    env = {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": path}
    refused = invoke(["webhooks", "redeliver", trimmed], **env)
    assert_one_line_failure(refused, trimmed, "trimmed after the retention", "ledger audit show")
    done = invoke(["webhooks", "redeliver", kept], **env)
    assert done.exit_code == 0 and "pending" in done.stdout
