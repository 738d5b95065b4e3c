"""The tracing port: named spans around the steps of a use case.

The domain names its spans and sets bounded attributes (ids, states,
outcomes; never content, tokens or keys). An adapter maps them onto
OpenTelemetry; :class:`NullTracer` does nothing. A trace context is a small
string mapping (W3C ``traceparent``/``tracestate``) that can be stored on an
event, so a later process continues the same trace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

AttributeValue = str | int | bool

#: keys a stored trace context may have, and their bounded length
TRACE_CONTEXT_KEYS = ("traceparent", "tracestate")
MAX_TRACE_CONTEXT_CHARS = 512


class Span(Protocol):
    """An open span: attributes can be added while it runs."""

    def set(self, key: str, value: AttributeValue) -> None: ...


class Tracer(Protocol):
    """Opens spans and exports the current trace context."""

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        parent: Mapping[str, str] | None = None,
    ) -> AbstractContextManager[Span]:
        """A span named ``name``; ``parent`` (a stored context) continues that trace."""
        ...

    def current_context(self) -> dict[str, str] | None:
        """The current trace context to store on an event, or None when not tracing."""
        ...


class _NullSpan:
    def set(self, key: str, value: AttributeValue) -> None:
        return None


class NullTracer:
    """Implements :class:`Tracer` by doing nothing."""

    @contextmanager
    def _span(self) -> Iterator[Span]:
        yield _NullSpan()

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        parent: Mapping[str, str] | None = None,
    ) -> AbstractContextManager[Span]:
        return self._span()

    def current_context(self) -> dict[str, str] | None:
        return None


def clean_trace_context(context: Mapping[str, str] | None) -> dict[str, str] | None:
    """Only the W3C keys, only short printable strings; None when nothing is left."""
    if not context:
        return None
    cleaned = {
        key: value
        for key, value in context.items()
        if key in TRACE_CONTEXT_KEYS
        and isinstance(value, str)
        and 0 < len(value) <= MAX_TRACE_CONTEXT_CHARS
        and value.isprintable()
    }
    return cleaned or None
