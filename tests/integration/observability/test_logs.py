"""LEDGER_LOG_FORMAT: JSON lines with trace and attempt ids, through the redaction filter."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from adapters.logs import JsonFormatter, RedactionFilter, configure_logging
from adapters.settings import load_settings
from adapters.tracing import OtelTracer

SECRET = "sk_live_LOGCANARY0123456789"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    handler.addFilter(RedactionFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("ledger.test-json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield sink
    logger.removeHandler(handler)


def lines(sink: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in sink.getvalue().splitlines()]


def test_one_json_object_per_record_with_trace_and_attempt_ids(captured: io.StringIO) -> None:
    tracer = OtelTracer(TracerProvider())
    logger = logging.getLogger("ledger.test-json")
    with tracer.span("ledger.worker.process", {"ledger.attempt_id": "att_42"}):
        logger.info("worker step outcome=%s", "succeeded")
    logger.info("worker attempt=%s", "att_7", extra={"attempt_id": "att_7"})
    logger.info("outside any span")
    inside, explicit, outside = lines(captured)
    assert inside["message"] == "worker step outcome=succeeded"
    assert inside["attempt_id"] == "att_42" and inside["level"] == "INFO"
    assert len(str(inside["trace_id"])) == 32 and len(str(inside["span_id"])) == 16
    assert explicit["attempt_id"] == "att_7" and "trace_id" not in explicit
    assert "attempt_id" not in outside and outside["logger"] == "ledger.test-json"


def test_secrets_and_tracebacks_never_reach_a_line(captured: io.StringIO) -> None:
    logger = logging.getLogger("ledger.test-json")
    logger.warning("provider said %s", SECRET)
    logger.warning("header Bearer %s", "abc.def")
    try:
        raise RuntimeError(SECRET)
    except RuntimeError:
        logger.exception("step failed")
    logger.info("extra", extra={"receipt": {"a": 1}, "note": SECRET})
    written = captured.getvalue()
    assert SECRET not in written and "abc.def" not in written
    assert "Traceback" not in written
    records = lines(captured)
    assert records[0]["message"] == "provider said [redacted]"
    assert records[3]["receipt"] == "[redacted]" and records[3]["note"] == "[redacted]"


def test_json_is_the_production_default_and_text_the_development_one() -> None:
    assert load_settings(env="development").effective_log_format == "text"
    prod = load_settings(env="production", auth_hs256_secret="p" * 40)
    assert prod.effective_log_format == "json"
    assert (
        load_settings(
            env="production", auth_hs256_secret="p" * 40, log_format="text"
        ).effective_log_format
        == "text"
    )


def test_configure_logging_installs_the_filter_on_the_root_handler() -> None:
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    try:
        configure_logging("json")
        (handler,) = root.handlers
        assert isinstance(handler.formatter, JsonFormatter)
        assert any(isinstance(f, RedactionFilter) for f in handler.filters)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
