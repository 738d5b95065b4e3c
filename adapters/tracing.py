"""OpenTelemetry behind the domain's tracing port, configured by the standard ``OTEL_*`` settings.

Nothing is exported by default. :func:`tracer_from_environment` returns a
tracer only when an exporter is configured (``OTEL_TRACES_EXPORTER=otlp`` or
``console``, or an ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``) and
``OTEL_SDK_DISABLED`` is not true; the OTLP exporter then reads its own
``OTEL_EXPORTER_OTLP_*`` settings (endpoint, headers, timeout).

Spans never record exception messages or stack traces (they may carry
content, I10): a failed span gets status ERROR and the exception type only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from adapters.logs import current_attempt
from domain.tracing import AttributeValue, Span, clean_trace_context

SERVICE_NAME = "execution-ledger"
_propagator = TraceContextTextMapPropagator()


class _OtelSpan:
    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, key: str, value: AttributeValue) -> None:
        self._span.set_attribute(key, value)


class OtelTracer:
    """Implements ``domain.tracing.Tracer`` with an OpenTelemetry tracer provider."""

    def __init__(self, provider: Any = None) -> None:
        chosen = provider if provider is not None else trace.get_tracer_provider()
        self._tracer = chosen.get_tracer("execution-ledger")

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        parent: Mapping[str, str] | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
    ) -> AbstractContextManager[Span]:
        return self._span(name, attributes, parent, kind)

    @contextmanager
    def _span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None,
        parent: Mapping[str, str] | None,
        kind: trace.SpanKind,
    ) -> Iterator[Span]:
        stored = clean_trace_context(parent)
        context = _propagator.extract(stored) if stored else None
        attempt_id = (attributes or {}).get("ledger.attempt_id")
        marked = current_attempt.set(str(attempt_id)) if attempt_id is not None else None
        try:
            with self._tracer.start_as_current_span(
                name,
                context=context,
                kind=kind,
                attributes=dict(attributes or {}),
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                try:
                    yield _OtelSpan(span)
                except BaseException as exc:
                    span.set_status(Status(StatusCode.ERROR))
                    span.set_attribute("error.type", type(exc).__name__)
                    raise
        finally:
            if marked is not None:
                current_attempt.reset(marked)

    def current_context(self) -> dict[str, str] | None:
        carrier: dict[str, str] = {}
        _propagator.inject(carrier)
        return clean_trace_context(carrier)


def exporting_configured(environ: Mapping[str, str] | None = None) -> bool:
    """True when the ``OTEL_*`` settings ask for traces to be exported."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return bool(
        exporter
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def tracer_from_environment(environ: Mapping[str, str] | None = None) -> OtelTracer | None:
    """A tracer exporting as ``OTEL_*`` says, or None when nothing is configured.

    Raises ValueError (one line) for an exporter name it does not know.
    """
    env = os.environ if environ is None else environ
    if not exporting_configured(env):
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    exporters: list[SpanExporter] = []
    for name in names:
        if name in ("", "otlp"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        else:
            raise ValueError(
                f"OTEL_TRACES_EXPORTER: unsupported exporter {name!r} (use otlp, console or none)"
            )
    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", SERVICE_NAME)})
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return OtelTracer(provider)
