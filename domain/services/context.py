"""What every use case receives: ports and a few validated settings values."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from domain.ports import Clock, EventStore, ExecutorRegistry, Renderer, TokenSource
from domain.rendering import TextRenderer
from domain.services.read_cache import ReadCache
from domain.services.watch_schedule import DEFAULT_NO_EFFECT_WATCH as DEFAULT_NO_EFFECT_WATCH
from domain.tracing import NullTracer, Tracer


@dataclass(frozen=True)
class ServiceContext:
    """Dependencies of the use cases; built once in ``adapters.bootstrap``."""

    store: EventStore
    clock: Clock
    tokens: TokenSource
    permissions: Collection[str]
    renderer: Renderer = field(default_factory=TextRenderer)
    registry: ExecutorRegistry | None = None
    presentation_ttl_seconds: int = 1800
    tracer: Tracer = field(default_factory=NullTracer)
    max_active_presentations: int = 20
    cache: ReadCache = field(default_factory=ReadCache)
    """Directory and proposal reads whose commits condition-check them (read_cache.py)."""
    no_effect_watch: tuple[int, ...] = DEFAULT_NO_EFFECT_WATCH
    """Seconds after a lookup's "not applied" (or a no_effect resolution) at which the
    lookup looks again (I12; ``LEDGER_NO_EFFECT_WATCH_SECONDS``)."""
