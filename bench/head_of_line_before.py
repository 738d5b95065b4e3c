"""The runtime as it was before the bounded pool and the webhook lanes, kept
runnable for ``bench_head_of_line.py`` only (never imported by the ledger).

- ``serial_worker_loop``: one worker thread per process, running each attempt
  the feed names to its end before it looks at the next one.
- ``OldDeliverer``: one delivery pass over every subscription on one thread:
  it lists every pending and failing record (``webhook#pending`` and
  ``webhook#failing``, ordered by the fact's time), takes the first of each
  (subscription, subject) and sends those that are due one after another.
  ``old_delivery_row`` is the record's layout of that time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from adapters.backend import WorkFeed
from adapters.bootstrap import Ledger
from adapters.webhooks import standard
from adapters.webhooks.config import WebhookSubscription
from adapters.webhooks.deliverer import (
    CLAIM_MARGIN_SECONDS,
    DeliveryFailed,
    HttpxTransport,
    backoff_seconds,
)
from domain.ports import Clock
from domain.timeutil import format_utc, parse_utc
from projections.inbox import sort_time
from projections.ports import ViewRecord, ViewStore
from projections.webhooks import DELIVERY_VIEW


def serial_worker_loop(ledger: Ledger, feed: WorkFeed, stop: threading.Event) -> None:
    """The worker loop before the pool: every attempt in turn, on this thread."""
    worker = ledger.make_worker()
    while not stop.is_set():
        for attempt_id in feed.poll(0.05):
            worker.process(attempt_id, trigger="notification")
            ledger.projector.project_attempt(attempt_id)


def old_delivery_row(data: Mapping[str, Any], version: int) -> ViewRecord:
    """A delivery record as it was listed: by its status, in order of the fact."""
    return ViewRecord(
        name=DELIVERY_VIEW,
        key=data["delivery_id"],
        version=version,
        data=dict(data),
        list_pk=f"webhook#{data['status']}",
        list_sk=f"{sort_time(data['created_at'])}#{data['delivery_id']}",
    )


def _outstanding(views: ViewStore) -> list[ViewRecord]:
    found: list[ViewRecord] = []
    for status in ("pending", "failing"):
        cursor: str | None = None
        while True:
            rows, cursor = views.list_views(f"webhook#{status}", 200, cursor)
            found.extend(rows)
            if cursor is None:
                break
    return found


def _heads(records: Iterable[ViewRecord]) -> list[ViewRecord]:
    first: dict[tuple[str, str], ViewRecord] = {}
    for row in records:
        group = (row.data["subscription_id"], row.data["subject_id"])
        held = first.get(group)
        order = (int(row.data["subject_version"]), str(row.list_sk))
        if held is None or order < (int(held.data["subject_version"]), str(held.list_sk)):
            first[group] = row
    return sorted(first.values(), key=lambda r: r.list_sk or "")


@dataclass
class OldDeliverer:
    """The single-threaded pass over every subscription's deliveries."""

    views: ViewStore
    subscriptions: Mapping[str, WebhookSubscription]
    clock: Clock
    transport: Any = field(default_factory=HttpxTransport)

    def run_once(self) -> int:
        now = self.clock.now()
        sent = 0
        for row in _heads(_outstanding(self.views)):
            subscription = self.subscriptions.get(row.data["subscription_id"])
            if subscription is None or parse_utc(row.data["next_try_at"]) > now:
                continue
            if self.deliver(row, subscription) is not None:
                sent += 1
        return sent

    def deliver(self, row: ViewRecord, subscription: WebhookSubscription) -> bool | None:
        data = dict(row.data)
        claimed_until = self.clock.now() + timedelta(
            seconds=4 * subscription.timeout_seconds + CLAIM_MARGIN_SECONDS
        )
        claim = {**data, "next_try_at": format_utc(claimed_until)}
        if not self.views.put_view(old_delivery_row(claim, row.version + 1)):
            return None
        body = standard.body(data["type"], data["body"])
        signed = standard.headers(subscription.secret, data["notification_id"], 0, body)
        status: int | None = None
        try:
            status = self.transport.post(
                subscription.url, signed, body, subscription.timeout_seconds
            )
            error = None if 200 <= status < 300 else "http_status"
        except DeliveryFailed as exc:
            error = exc.kind
        now = self.clock.now()
        data["attempts"] = int(data["attempts"]) + 1
        data["response_status"] = status
        if error is None:
            data.update(status="delivered", delivered_at=format_utc(now))
        else:
            wait = backoff_seconds(data["attempts"], 0.5)
            data.update(
                status="failing",
                last_error=error,
                next_try_at=format_utc(now + timedelta(seconds=wait)),
            )
        self.views.put_view(old_delivery_row(data, row.version + 2))
        return error is None

    def loop(self, stop: threading.Event) -> None:
        """What ``ledger serve``'s delivery thread did: a pass, or a second's wait."""
        while not stop.is_set():
            if not self.run_once():
                stop.wait(1.0)
