"""The projector Lambda: keeps the status views and the inbox current from the
table's stream.

Its event source mapping delivers INSERTs of attempt and proposal events
(``pk`` begins with ``att_`` or ``prop_``); the handler applies the local
stream reader's rule again. A
record only names the stream that changed: the projector re-reads that stream
with a consistent read and writes the folded rows with a version guard, so
duplicates, retries and reordering can never regress a view. A stream is read
once per batch (every record of a batch was written before the batch was
delivered, so one read covers them all), and the rows of every stream of the
batch are written together: one guarded ``TransactWriteItems`` per 100 rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from adapters.aws_lambda.common import (
    NAMESPACE,
    each_batch_once,
    emf_forwarder,
    get_ledger,
    make_logger,
)
from adapters.aws_lambda.records import stream_id_from_record
from projections.projector import Projector

__all__ = ["handler", "project_batch", "stream_id_from_record"]

SERVICE = "ledger-projector"

logger = make_logger(SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


def project_batch(
    projector: Projector, event: Mapping[str, Any], context: Any
) -> tuple[dict[str, Any], set[str], int]:
    """One stream batch: each stream read once, the rows of them all written
    together (partial batch response, streams projected, rows moved)."""
    return each_batch_once(
        event,
        context,
        logger,
        projector.rows_of,
        lambda rows: projector.views.put_views(rows, ()),
        skipped="not_an_attempt",
        applied="projected",
    )


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Project every attempt and proposal stream named in a stream batch (partial
    batch response)."""
    if not isinstance(event, Mapping) or not isinstance(event.get("Records"), list):
        raise ValueError("unrecognised event: expected DynamoDB stream records")
    response, projected, moved = project_batch(get_ledger().projector, event, context)
    failed = len(response.get("batchItemFailures", []))
    metrics.add_metric(name="ViewsMoved", unit=MetricUnit.Count, value=moved)
    if moved:
        emf_forwarder(SERVICE)("ledger_projection_updates_total", moved, {})
    metrics.add_metric(name="RecordFailures", unit=MetricUnit.Count, value=failed)
    logger.info(
        "projection batch done",
        extra={
            "record_count": len(event["Records"]),
            "streams": len(projected),
            "views_moved": moved,
            "failed": failed,
        },
    )
    return response
