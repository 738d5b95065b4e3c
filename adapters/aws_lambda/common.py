"""What the Lambda handlers share: the ledger of the execution environment,
redacted logging, the stream batch processing and safe record keys.

Nothing here does work at import time. The ledger (and with it the settings)
is built on the first invocation by :func:`get_ledger`, from
``environment_ledger``, which builds it once per execution environment; a bad
setting fails that invocation with one clear ``SettingsError`` line.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from adapters.bootstrap import Ledger, build_ledger
from adapters.logs import CONTENT_KEYS
from adapters.settings import SettingsError, StoreKind, load_settings, unknown_variable_warnings
from adapters.tracing import tracer_from_environment
from domain.errors import LedgerError
from domain.redaction import redact

NAMESPACE = "ExecutionLedger"


class RedactingFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter, with every log line redacted (content keys hidden)."""

    def serialize(self, log: Any) -> str:
        return super().serialize(redact(log, CONTENT_KEYS))


def emf_forwarder(service: str) -> Callable[[str, float, dict[str, str]], None]:
    """Sends every metric the ledger records as CloudWatch EMF under the same name.

    Labels become dimensions; they are already bounded and redacted (I10).
    """
    from aws_lambda_powertools import single_metric
    from aws_lambda_powertools.metrics import MetricUnit

    def forward(name: str, value: float, labels: dict[str, str]) -> None:
        unit = MetricUnit.Seconds if name.endswith("_seconds") else MetricUnit.Count
        with single_metric(
            name=name,
            unit=unit,
            value=value,
            namespace=NAMESPACE,
            default_dimensions={"service": service},
        ) as metric:
            for key, label in sorted(labels.items()):
                metric.add_dimension(name=key, value=label)

    return forward


def make_logger(service: str) -> Logger:
    """A structured logger that never writes item images, tokens or secrets."""
    return Logger(service=service, logger_formatter=RedactingFormatter())


# -- the ledger, built once per execution environment -----------------------------

T = TypeVar("T")


class BuiltOnce(Generic[T]):
    """A value made on first use and kept for the execution environment: the
    cold start builds it, warm invocations reuse it."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._built: list[T] = []

    def get(self) -> T:
        with self._lock:
            if not self._built:
                self._built.append(self._build())
            return self._built[0]


def load_lambda_settings() -> Any:
    """Settings for a Lambda function: validated, and only the DynamoDB store.

    An embedded store would create a file (a resource) inside the function and
    lose it with the execution environment, so it is refused here.
    """
    settings = load_settings()
    for warning in unknown_variable_warnings(os.environ):
        logging.getLogger("ledger.settings").warning("%s", warning)
    task_root = os.environ.get("LAMBDA_TASK_ROOT")
    if settings.executors_file and task_root and not os.path.isabs(settings.executors_file):
        # The executors file is packaged with the function: relative to the code root.
        settings = settings.model_copy(
            update={"executors_file": os.path.join(task_root, settings.executors_file)}
        )
    if settings.store is not StoreKind.DYNAMODB:
        raise SettingsError(
            "invalid settings: LEDGER_STORE: the Lambda functions need 'dynamodb' "
            f"(got {settings.store.value!r})"
        )
    return settings


def ledger_from_environment() -> Ledger:
    """A ledger wired from the function's environment (its LEDGER_* settings)."""
    # build_ledger makes a DynamoDB client and nothing else: no table, no queue,
    # no request is sent until a use case needs one.
    ledger = build_ledger(load_lambda_settings())
    # Spans only when OTEL_* configures an exporter (e.g. a collector layer).
    ledger.tracer = tracer_from_environment()
    return ledger


environment_ledger: BuiltOnce[Ledger] = BuiltOnce(ledger_from_environment)
"""Where every handler's ledger comes from; another ``BuiltOnce`` here wires
the handlers to another ledger (an embedding, a test)."""


def get_ledger() -> Ledger:
    """The ledger of this execution environment, built on first use (cold start)."""
    return environment_ledger.get()


# -- stream records ----------------------------------------------------------------


class RecordFailed(Exception):
    """A stream record was not handled; the message is a bounded reason code only."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def reason_code(exc: BaseException) -> str:
    """A bounded, content-free code for an exception (never its message)."""
    if isinstance(exc, RecordFailed):
        return exc.reason
    if isinstance(exc, LedgerError):
        return exc.code
    return "unexpected_" + type(exc).__name__


def record_keys(record: Any) -> dict[str, str]:
    """The keys of a stream record that are safe to log: table key and sequence number."""
    keys: dict[str, str] = {}
    if not isinstance(record, Mapping):
        return keys
    dynamodb = record.get("dynamodb")
    if isinstance(dynamodb, Mapping):
        item_keys = dynamodb.get("Keys")
        if isinstance(item_keys, Mapping):
            for name in ("pk", "sk"):
                attribute = item_keys.get(name)
                if isinstance(attribute, Mapping):
                    for value in attribute.values():
                        keys[name] = str(value)[:200]
        sequence = dynamodb.get("SequenceNumber")
        if isinstance(sequence, str):
            keys["sequence_number"] = sequence
    event_name = record.get("eventName")
    if isinstance(event_name, str):
        keys["event_name"] = event_name
    return keys


UNNAMED = ""
"""The identifier a failed record without a sequence number is reported by:
Lambda takes an empty one as a failure of the whole batch."""


def process_stream_batch(
    event: Mapping[str, Any], context: Any, handle: Callable[[DynamoDBRecord], str]
) -> dict[str, Any]:
    """Powertools' partial batch response for a DynamoDB Streams batch: ``handle``
    runs once per record, and a record it raises for is reported as a batch item
    failure by its sequence number, so Lambda retries from it.

    A record without a sequence number (not from a stream) cannot be named: it
    is reported with an empty identifier, which Lambda treats as a failure of
    the whole batch, the safe answer when the record cannot be named.
    Powertools' own report would name it None, or fail on a record with no
    ``dynamodb`` part, so such a record's failure is kept aside and added here.
    """
    unnamed: list[BaseException] = []

    def each(record: DynamoDBRecord) -> str:
        try:
            return handle(record)
        except Exception as exc:
            if "sequence_number" in record_keys(record.raw_event):
                raise
            unnamed.append(exc)
            return "failed_unnamed"

    processor = BatchProcessor(
        event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
    )
    response = process_partial_response(
        event=dict(event), record_handler=each, processor=processor, context=context
    )
    failures = [dict(failure) for failure in response.get("batchItemFailures", [])]
    if unnamed:
        failures.append({"itemIdentifier": UNNAMED})
    return {**response, "batchItemFailures": failures}


def each_batch_once(
    event: Mapping[str, Any],
    context: Any,
    logger: Logger,
    fold: Callable[[str], list[T]],
    write: Callable[[list[T]], int],
    *,
    skipped: str,
    applied: str,
) -> tuple[dict[str, Any], set[str], int]:
    """Fold every attempt or proposal stream a stream batch names once, then write
    what they all fold into together (``write`` once for the whole batch).

    Every record of the batch was written before the batch was delivered, so one
    read per stream covers them all, and one write (or a few, past a
    transaction's bound) carries every stream's rows. A stream whose fold fails
    fails only its own records; when the write fails, each stream is written
    on its own, and only the streams that fail again fail their records.
    Failed records are logged with their keys (never their content) and
    reported in the partial batch response, so Lambda retries them. Returns
    the response, the streams written and what ``write`` returned.
    """
    from adapters.aws_lambda.records import stream_id_from_record
    from adapters.streams import MalformedRecord

    def named(raw: Any) -> tuple[str | None, str | None]:
        """The stream a record names (None: not one this batch folds), or why not."""
        try:
            return stream_id_from_record(raw), None
        except Exception as exc:
            return None, "malformed_record" if isinstance(exc, MalformedRecord) else reason_code(
                exc
            )

    streams = [named(raw)[0] for raw in event.get("Records", [])]
    failed: dict[str, str] = {}  # failed streams -> reason code
    folded: dict[str, list[T]] = {}
    for stream_id in dict.fromkeys(s for s in streams if s is not None):
        try:
            folded[stream_id] = fold(stream_id)
        except Exception as exc:
            failed[stream_id] = reason_code(exc)
    total = 0
    try:
        total = write([row for rows in folded.values() for row in rows])
    except Exception:
        # One stream's rows may be what the store refuses: write each stream on
        # its own, so only the streams that still fail are retried.
        for stream_id, rows in list(folded.items()):
            try:
                total += write(rows)
            except Exception as exc:
                failed[stream_id] = reason_code(exc)
                del folded[stream_id]

    def handle(record: DynamoDBRecord) -> str:
        raw = record.raw_event
        stream_id, code = named(raw)
        if code is None and stream_id is not None:
            code = failed.get(stream_id)
        if code is not None:
            logger.warning("stream record failed", extra={"reason": code, **record_keys(raw)})
            raise RecordFailed(code)
        return skipped if stream_id is None else applied

    return process_stream_batch(event, context, handle), set(folded), total
