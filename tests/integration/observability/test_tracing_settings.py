"""Exporting follows the standard OTEL_* settings, and nothing is exported by default."""

from __future__ import annotations

import pytest

from adapters.tracing import OtelTracer, exporting_configured, tracer_from_environment


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_SERVICE_NAME": "ledger"},
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
    ],
)
def test_nothing_is_exported_unless_configured(environ: dict[str, str]) -> None:
    assert not exporting_configured(environ)
    assert tracer_from_environment(environ) is None


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"},
        {"OTEL_TRACES_EXPORTER": "console"},
    ],
)
def test_an_exporter_setting_builds_a_tracer(environ: dict[str, str]) -> None:
    assert isinstance(tracer_from_environment(environ), OtelTracer)


def test_an_unknown_exporter_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="OTEL_TRACES_EXPORTER: unsupported exporter 'jaeger'"):
        tracer_from_environment({"OTEL_TRACES_EXPORTER": "jaeger"})


def test_a_failing_step_records_the_type_never_the_message() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = OtelTracer(provider)
    with pytest.raises(RuntimeError), tracer.span("ledger.executor.call"):
        raise RuntimeError("sk_live_SECRETINMESSAGE")
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None and span.attributes["error.type"] == "RuntimeError"
    assert "sk_live" not in repr(span.to_json())
