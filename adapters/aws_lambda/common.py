"""What the Lambda handlers share: the cached ledger, redacted logging, the
stream batch processor and safe record keys.

Nothing here does work at import time. The ledger (and with it the settings)
is built on the first invocation by :func:`get_ledger`; a bad setting fails
that invocation with one clear ``SettingsError`` line. Tests inject a wired
ledger with :func:`set_ledger_for_tests`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

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
from adapters.settings import SettingsError, StoreKind, load_settings
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

_lock = threading.Lock()
_ledger: Ledger | None = None


def load_lambda_settings() -> Any:
    """Settings for a Lambda function: validated, and only the DynamoDB store.

    An embedded store would create a file (a resource) inside the function and
    lose it with the execution environment, so it is refused here.
    """
    settings = load_settings()
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


def get_ledger() -> Ledger:
    """The ledger of this execution environment, built on first use (cold start)."""
    global _ledger
    with _lock:
        if _ledger is None:
            # build_ledger makes a DynamoDB client and nothing else: no table,
            # no queue, no request is sent until a use case needs one.
            _ledger = build_ledger(load_lambda_settings())
            # Spans only when OTEL_* configures an exporter (e.g. a collector layer).
            _ledger.tracer = tracer_from_environment()
        return _ledger


def set_ledger_for_tests(ledger: Ledger | None) -> None:
    """Use ``ledger`` instead of one built from the environment (None resets)."""
    global _ledger
    with _lock:
        _ledger = ledger


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


class StreamBatchProcessor(BatchProcessor):
    """Powertools' DynamoDB Streams processor that reports every failure as a
    batch item failure, never as an exception.

    A failed record is reported by its sequence number and Lambda retries from
    it. A record without a sequence number (not from a stream) is reported with
    an empty identifier, which Lambda treats as a failure of the whole batch:
    the safe answer when the record cannot be named.
    """

    def __init__(self) -> None:
        super().__init__(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)

    def _collect_dynamodb_failures(self) -> list[dict[str, str]]:
        failures: list[dict[str, str]] = []
        for message in self.fail_messages:
            raw = getattr(message, "raw_event", None)
            failures.append({"itemIdentifier": record_keys(raw).get("sequence_number", "")})
        return failures


def each_stream_once(
    event: Mapping[str, Any],
    context: Any,
    logger: Logger,
    apply: Callable[[str], int],
    *,
    skipped: str,
    applied: str,
) -> tuple[dict[str, Any], set[str], int]:
    """Run ``apply`` once for every attempt or proposal stream a stream batch names.

    A record names only the stream that changed and every record of the batch
    was written before the batch was delivered, so one call per stream covers
    them all. A record that fails is logged with its keys (never its content)
    and reported in the partial batch response, so Lambda retries it. Returns
    the response, the streams applied and the sum of what ``apply`` returned.
    """
    from adapters.aws_lambda.records import stream_id_from_record
    from adapters.streams import MalformedRecord

    done: set[str] = set()
    total = 0

    def handle(record: DynamoDBRecord) -> str:
        nonlocal total
        raw = record.raw_event
        try:
            stream_id = stream_id_from_record(raw)
            if stream_id is None:
                return skipped
            if stream_id in done:
                return "already_" + applied
            total += apply(stream_id)
        except Exception as exc:
            code = "malformed_record" if isinstance(exc, MalformedRecord) else reason_code(exc)
            logger.warning("stream record failed", extra={"reason": code, **record_keys(raw)})
            raise RecordFailed(code) from exc
        done.add(stream_id)
        return applied

    response = process_partial_response(
        event=dict(event), record_handler=handle, processor=StreamBatchProcessor(), context=context
    )
    return dict(response), done, total
