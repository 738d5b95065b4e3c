"""The projector Lambda: keeps the status views and the inbox current from the
table's stream.

Its event source mapping delivers INSERTs of attempt and proposal events
(``pk`` begins with ``att_`` or ``prop_``); the handler applies the local
stream reader's rule again. A
record only names the stream that changed: the projector re-reads that stream
with a consistent read and writes the folded view with a version guard
(``Projector.project_streams``), so duplicates, retries and reordering can
never regress a view. A stream is read once per batch: every record of a batch
was written before the batch was delivered, so one read covers them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from adapters.aws_lambda.common import (
    NAMESPACE,
    RecordFailed,
    StreamBatchProcessor,
    emf_forwarder,
    get_ledger,
    make_logger,
    reason_code,
    record_keys,
    set_ledger_for_tests,
)
from adapters.streams import MalformedRecord, attempt_streams_from_records

__all__ = ["handler", "set_ledger_for_tests", "stream_id_from_record"]

SERVICE = "ledger-projector"

logger = make_logger(SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


def stream_id_from_record(record: Any) -> str | None:
    """The attempt or proposal stream a record changed, or None for anything else.

    The choice is the local stream reader's (``attempt_streams_from_records``);
    a record without a table key to name raises MalformedRecord.
    """
    if not isinstance(record, Mapping):
        raise MalformedRecord("record is not an object")
    dynamodb = record.get("dynamodb")
    if not isinstance(dynamodb, Mapping):
        raise MalformedRecord("record has no dynamodb section")
    keys = dynamodb.get("Keys")
    pk = keys.get("pk") if isinstance(keys, Mapping) else None
    if not isinstance(pk, Mapping) or not isinstance(pk.get("S"), str) or not pk["S"]:
        raise MalformedRecord("record has no pk")
    found = attempt_streams_from_records([dict(record)])
    return found[0] if found else None


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Project every attempt and proposal stream named in a stream batch (partial
    batch response)."""
    if not isinstance(event, Mapping) or not isinstance(event.get("Records"), list):
        raise ValueError("unrecognised event: expected DynamoDB stream records")
    projector = get_ledger().projector
    projected: set[str] = set()
    moved = 0

    def handle(record: DynamoDBRecord) -> str:
        nonlocal moved
        raw = record.raw_event
        try:
            stream_id = stream_id_from_record(raw)
            if stream_id is None:
                return "not_an_attempt"
            if stream_id in projected:
                return "already_projected"
            moved += projector.project_streams([stream_id])
        except Exception as exc:
            code = "malformed_record" if isinstance(exc, MalformedRecord) else reason_code(exc)
            logger.warning("stream record failed", extra={"reason": code, **record_keys(raw)})
            raise RecordFailed(code) from exc
        projected.add(stream_id)
        return "projected"

    response = process_partial_response(event=dict(event), record_handler=handle,
                                        processor=StreamBatchProcessor(), context=context)
    failed = len(response.get("batchItemFailures", []))
    metrics.add_metric(name="ViewsMoved", unit=MetricUnit.Count, value=moved)
    if moved:
        emf_forwarder(SERVICE)("ledger_projection_updates_total", moved, {})
    metrics.add_metric(name="RecordFailures", unit=MetricUnit.Count, value=failed)
    logger.info("projection batch done", extra={
        "record_count": len(event["Records"]), "streams": len(projected),
        "views_moved": moved, "failed": failed,
    })
    return dict(response)
