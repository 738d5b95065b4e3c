"""Log output for the long-running commands: text or one JSON object per line.

Every record passes the redaction filter first (:func:`redact`: secret-shaped
strings and content-bearing keys never reach a line, I10). JSON lines carry
the time, level, logger, message, the current trace and span ids, and the
attempt id (from ``extra={"attempt_id": ...}`` or the span the line is
logged in).
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from domain.redaction import REDACTED, looks_secret
from domain.redaction import redact as redact_value

# Keys whose values are item images, request bodies or provider data: never logged (I10).
CONTENT_KEYS = frozenset(
    {
        "newimage",
        "oldimage",
        "state",
        "content",
        "spec",
        "receipt",
        "body",
        "headers",
        "multivalueheaders",
        "querystringparameters",
        "cookies",
        "records",
        "payload",
    }
)
# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {
    "message",
    "asctime",
    "taskName",
}

current_attempt: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ledger_current_attempt", default=None
)


def redact(value: Any) -> Any:
    """The shared redaction (:func:`domain.redaction.redact`) with the content keys hidden."""
    return redact_value(value, CONTENT_KEYS)


@contextmanager
def attempt_in_logs(attempt_id: str) -> Iterator[None]:
    """Lines logged inside carry ``attempt_id``."""
    token = current_attempt.set(attempt_id)
    try:
        yield
    finally:
        current_attempt.reset(token)


class RedactionFilter(logging.Filter):
    """Replaces a record's message with its redacted form (secret-shaped text -> [redacted])."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: keep the template only
            message = str(record.msg)
        record.msg = " ".join(
            REDACTED if looks_secret(word) else word for word in message.split(" ")
        )
        if looks_secret(record.msg):
            record.msg = REDACTED
        record.args = None
        record.exc_info = None  # tracebacks may carry content
        record.exc_text = None
        record.stack_info = None
        return True


def _trace_ids() -> tuple[str | None, str | None]:
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - a dependency, but logs must not need it
        return None, None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None, None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, trace and attempt ids."""

    def format(self, record: logging.LogRecord) -> str:
        trace_id, span_id = _trace_ids()
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        attempt = extras.pop("attempt_id", None) or current_attempt.get()
        if attempt is not None:
            line["attempt_id"] = str(attempt)
        if trace_id is not None:
            line["trace_id"], line["span_id"] = trace_id, span_id
        for key, value in extras.items():
            line.setdefault(
                key, value if isinstance(value, str | int | float | bool | None) else str(value)
            )
        return json.dumps(redact(line), separators=(",", ":"), ensure_ascii=False)


def configure_logging(log_format: str, *, level: int = logging.INFO) -> None:
    """Root handler on stderr in ``text`` or ``json``, behind the redaction filter."""
    handler = logging.StreamHandler()
    handler.addFilter(RedactionFilter())
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
