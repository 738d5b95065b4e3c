"""The wired ledger builds its services context and projector once, and again
only when one of the fields they come from is assigned (``ledger serve`` sets
the tracer after construction; tests swap the views or the store)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from adapters.bootstrap import build_ledger
from adapters.instrumentation import TracedStore
from adapters.settings import load_settings
from domain.tracing import AttributeValue, NullTracer, Span


class RecordingTracer:
    """A tracer that only remembers span names."""

    def __init__(self) -> None:
        self.names: list[str] = []

    @contextmanager
    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        parent: Mapping[str, str] | None = None,
    ) -> Iterator[Span]:
        self.names.append(name)
        with NullTracer().span(name) as span:
            yield span

    def current_context(self) -> dict[str, str] | None:
        return None


def test_the_context_and_the_projector_are_built_once() -> None:
    ledger = build_ledger(load_settings(store="memory", env="test", read_cache_entries=7))
    try:
        assert ledger.context is ledger.context
        assert ledger.projector is ledger.projector
        assert ledger.context.cache is ledger.read_cache
        assert ledger.read_cache.max_entries == 7
        assert ledger.context.store is ledger.store  # no tracer: no tracing wrapper
        assert isinstance(ledger.tracer, NullTracer) and not ledger.tracing
    finally:
        ledger.close()


def test_assigning_a_source_field_builds_them_again() -> None:
    ledger = build_ledger(load_settings(store="memory", env="test"))
    try:
        context, projector = ledger.context, ledger.projector
        tracer = RecordingTracer()
        ledger.tracer = tracer
        assert ledger.tracing and ledger.context is not context
        assert ledger.context.tracer is tracer
        assert isinstance(ledger.context.store, TracedStore)
        assert ledger.projector is not projector  # built again, on the same views
        ledger.tracer = None  # tracing off again
        assert isinstance(ledger.context.tracer, NullTracer)
        assert ledger.context.store is ledger.store
        views = ledger.views
        ledger.views = views
        assert ledger.projector.views is views
        before = ledger.context
        ledger.effects = ledger.effects  # not a source of either: nothing is rebuilt
        assert ledger.context is before
    finally:
        ledger.close()
