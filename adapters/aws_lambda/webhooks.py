"""The webhook Lambda: records and sends the signed webhooks of design.md 5.10 on AWS.

Its event source mapping delivers INSERTs of attempt and proposal events, the
same records the projector reads. Every stream a batch names is read once
and folded by each ``[[webhook]]`` subscription's notifier (a stream no
subscription can use is not read); the delivery records they imply (one per
fact and subscription, version-guarded, so a retried or replayed batch adds
nothing) are written together, one guarded ``TransactWriteItems`` per 100.
A record that cannot be written is a batch item failure: Lambda retries it,
bisects the batch, and finally sends the batch's metadata to the failure
queue, so the stream position never moves past a fact whose delivery is not
recorded.

Then it sends what is outstanding for the streams of the batch (in order per
attempt, as ``ledger serve`` does), every subscription on a lane of its own so
that one slow receiver does not hold the others. A receiver that is down or
slow never fails the batch: the delivery is recorded ``failing`` with its
backoff, and the scheduled invocation (``{"mode": "deliver"}``) sends every
due delivery again (reading only what is due).
The scheduled pass also records ``proposal.expired`` for watched proposal
versions whose expiry has passed (expiry is derived from time: no event says it),
and trims delivered records older than ``LEDGER_WEBHOOK_RETENTION_SECONDS`` to
tombstones without their body (``projections.webhook_retention``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from adapters.aws_lambda.common import (
    NAMESPACE,
    each_batch_once,
    emf_forwarder,
    get_ledger,
    make_logger,
    reason_code,
)
from adapters.bootstrap import Ledger
from domain.ports import EventStore
from projections.ports import TrackedViewStore
from projections.webhook_fold import streams_records
from projections.webhook_retention import trim_delivered
from projections.webhooks import WebhookNotifier

__all__ = ["DELIVER_MODE", "handler", "record_batch"]

SERVICE = "ledger-webhooks"
DELIVER_MODE = "deliver"
# Stop starting new sends this long before the function's own timeout.
RESERVE_MILLIS = 15_000

logger = make_logger(SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


def _deliver(ledger: Ledger, context: Any, subjects: set[str] | None) -> int:
    """One delivery pass (never raises: what is not sent now is sent later)."""
    started = time.monotonic()

    def out_of_time() -> bool:
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if callable(remaining):
            return int(remaining()) < RESERVE_MILLIS
        return time.monotonic() - started > 60

    deliverer = ledger.make_deliverer()
    try:
        if subjects is None:  # the scheduled pass: records from before the due lists
            deliverer.adopt_legacy()
        sent = deliverer.run_once(subjects=subjects, stop=out_of_time)
        if subjects is None and not out_of_time():  # and the retention of delivered ones
            trim_delivered(
                ledger.views, ledger.clock.now(), ledger.settings.webhook_retention_seconds
            )
        return sent
    except Exception as exc:
        logger.warning("delivery pass failed", extra={"reason": reason_code(exc)})
        return 0
    finally:
        deliverer.close()


def record_batch(
    notifiers: Sequence[WebhookNotifier],
    store: EventStore,
    views: TrackedViewStore,
    event: Mapping[str, Any],
    context: Any,
) -> tuple[dict[str, Any], set[str], int]:
    """The delivery records of one stream batch: each stream read once, the
    records of them all written together (partial batch response, streams,
    records written)."""
    return each_batch_once(
        event,
        context,
        logger,
        lambda stream_id: streams_records(notifiers, store, [stream_id]),
        lambda rows: views.put_views(rows, ()),
        skipped="not_an_event",
        applied="recorded",
    )


def _record_batch(
    ledger: Ledger, event: Mapping[str, Any], context: Any
) -> tuple[dict[str, Any], set[str], int]:
    return record_batch(ledger.webhook_notifiers(), ledger.store, ledger.views, event, context)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """A stream batch (partial batch response), or the scheduled delivery pass."""
    ledger = get_ledger()
    ledger.metrics.forward = emf_forwarder(SERVICE)
    if isinstance(event, Mapping) and event.get("mode") == DELIVER_MODE:
        for notifier in ledger.webhook_notifiers():  # proposal.expired comes from the clock
            notifier.sweep_expired()
        sent = _deliver(ledger, context, None) if ledger.webhooks else 0
        metrics.add_metric(name="WebhookSends", unit=MetricUnit.Count, value=sent)
        logger.info("delivery pass done", extra={"sent": sent})
        return {"mode": DELIVER_MODE, "subscriptions": len(ledger.webhooks), "sent": sent}
    if not isinstance(event, Mapping) or not isinstance(event.get("Records"), list):
        raise ValueError(
            f'unrecognised event: expected DynamoDB stream records or {{"mode": "{DELIVER_MODE}"}}'
        )
    response, streams, written = _record_batch(ledger, event, context)
    sent = _deliver(ledger, context, streams) if streams and ledger.webhooks else 0
    failed = len(response.get("batchItemFailures", []))
    metrics.add_metric(name="DeliveriesRecorded", unit=MetricUnit.Count, value=written)
    metrics.add_metric(name="WebhookSends", unit=MetricUnit.Count, value=sent)
    metrics.add_metric(name="RecordFailures", unit=MetricUnit.Count, value=failed)
    logger.info(
        "webhook batch done",
        extra={
            "record_count": len(event["Records"]),
            "streams": len(streams),
            "deliveries_recorded": written,
            "sent": sent,
            "failed": failed,
        },
    )
    return response
