"""The one wiring point: settings -> backend (store), clock, tokens, services.

The backend is chosen here and only here (:func:`build_backend`); everything
that differs by store comes from it. The threaded local runtime
(``adapters/runtime.py``) and the Lambda handlers (``adapters/aws_lambda/``)
are two drivers of the same :class:`Ledger`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from adapters.backend import Backend, Lag
from adapters.executors.fake import EffectLedger, FileEffectLedger
from adapters.executors.loader import load_executors
from adapters.executors.registry import StaticExecutorRegistry
from adapters.instrumentation import InstrumentedRegistry, TracedStore
from adapters.metrics import Metrics, lag_gauges, view_gauges, webhook_gauges
from adapters.recorder import LedgerRecorder
from adapters.settings import Settings, StoreKind
from adapters.store import LedgerStore
from adapters.system import SecretsTokenSource, SystemClock
from adapters.view_changes import NotifyingViewStore
from adapters.webhooks.config import WebhookSubscription
from domain.attempt import AttemptStatus
from domain.ports import Clock, Renderer, TokenSource
from domain.rendering import TextRenderer
from domain.services.context import ServiceContext
from domain.services.execution import Worker, WorkerPolicy
from domain.services.idempotency import InFlight
from domain.services.read_cache import ReadCache
from domain.tracing import NullTracer, Tracer
from projections.ports import Subscriber, TrackedViewStore
from projections.projector import Projector
from projections.webhooks import WebhookNotifier

if TYPE_CHECKING:
    from adapters.dynamodb.client import DynamoDBClient, DynamoDBStreamsClient
    from adapters.webhooks.deliverer import Deliverer


def backend_type(settings: Settings) -> type[Backend]:
    """The backend class the settings choose (the one store choice)."""
    if settings.store is StoreKind.MEMORY:
        from adapters.memory.backend import MemoryBackend

        return MemoryBackend
    if settings.store is StoreKind.SQLITE:
        from adapters.sqlite.backend import SQLiteBackend

        return SQLiteBackend
    from adapters.dynamodb.backend import DynamoDBBackend

    return DynamoDBBackend


def build_backend(
    settings: Settings,
    *,
    dynamodb_client: DynamoDBClient | None = None,
    dynamodb_streams_client: DynamoDBStreamsClient | None = None,
) -> Backend:
    """The backend the settings choose; creates the embedded schema if needed."""
    return backend_type(settings).from_settings(
        settings, dynamodb_client=dynamodb_client, dynamodb_streams_client=dynamodb_streams_client
    )


def preflight(settings: Settings) -> None:
    """Before anything is opened or logged: the chosen store's check of what the
    worker and subscriber loops will read (``PreflightError``, one line)."""
    backend_type(settings).preflight(settings)


def build_recorder(
    settings: Settings, *, dynamodb_client: DynamoDBClient | None = None
) -> LedgerRecorder:
    """The recorder the settings choose (the backend's)."""
    return build_backend(settings, dynamodb_client=dynamodb_client).recorder


def backend_for(recorder: LedgerRecorder) -> Backend:
    """The backend around an existing recorder (tests wire recorders by hand)."""
    return recorder.make_backend()


def build_views(recorder: LedgerRecorder) -> TrackedViewStore:
    """The view store living beside the recorder's events (same file or table)."""
    return backend_for(recorder).views


def policy_from_settings(s: Settings) -> WorkerPolicy:
    """The worker policy the settings describe."""
    return WorkerPolicy(
        lease_seconds=s.lease_seconds,
        backoff_base_seconds=s.backoff_base_seconds,
        backoff_max_seconds=s.backoff_max_seconds,
        max_predispatch_leases=s.max_predispatch_leases,
        max_dispatches=s.max_dispatches,
    )


# The inputs the derived objects (the services context, the projector) are built
# from: assigning one of them (a test swapping the views, ``ledger serve`` setting
# the tracer) drops what was built from it, and the next access builds it again.
_DERIVED_FROM = frozenset(
    {
        "settings",
        "store",
        "views",
        "clock",
        "tokens",
        "registry",
        "renderer",
        "metrics",
        "read_cache",
        "_tracer",
    }
)


@dataclass(eq=False)
class Ledger:
    """Everything an entry point needs, wired once (:func:`build_ledger`).

    The services context and the projector are built on first use and kept;
    assigning one of the fields they are built from (``tracer`` included: the
    one step after construction that ``ledger serve`` takes, once the ``OTEL_*``
    settings are read) builds them again on the next access.
    """

    settings: Settings
    store: LedgerStore
    backend: Backend
    views: TrackedViewStore
    clock: Clock = field(default_factory=SystemClock)
    tokens: TokenSource = field(default_factory=SecretsTokenSource)
    registry: StaticExecutorRegistry = field(default_factory=StaticExecutorRegistry)
    renderer: Renderer = field(default_factory=TextRenderer)
    effects: EffectLedger | FileEffectLedger | None = None  # None: the fakes are off
    metrics: Metrics = field(default_factory=Metrics)
    webhooks: list[WebhookSubscription] = field(default_factory=list)
    read_cache: ReadCache = field(default_factory=ReadCache)  # one per process: shared
    in_flight: InFlight = field(default_factory=InFlight)  # idempotency keys being processed
    _tracer: Tracer = field(default_factory=NullTracer, init=False, repr=False)
    _context: ServiceContext | None = field(default=None, init=False, repr=False)
    _projector: Projector | None = field(default=None, init=False, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _DERIVED_FROM:
            object.__setattr__(self, "_context", None)
            object.__setattr__(self, "_projector", None)

    @property
    def tracer(self) -> Tracer:
        """The spans of the use cases (``NullTracer``: none)."""
        return self._tracer

    @tracer.setter
    def tracer(self, tracer: Tracer | None) -> None:
        """Trace from now on with ``tracer`` (None: stop tracing); the context is
        built again with it (``adapters.tracing`` builds one from ``OTEL_*``)."""
        self._tracer = NullTracer() if tracer is None else tracer

    @property
    def tracing(self) -> bool:
        """True when spans are recorded (a tracer other than ``NullTracer``)."""
        return not isinstance(self._tracer, NullTracer)

    @property
    def projector(self) -> Projector:
        """Applies attempt and proposal streams to the views."""
        if self._projector is None:
            self._projector = Projector(self.store, self.views)
        return self._projector

    def subscribers(self) -> list[Subscriber]:
        """Every subscriber of the log this ledger keeps: the status projector,
        then one webhook notifier per subscription (design.md 5.10)."""
        return [self.projector, *self.webhook_notifiers()]

    def webhook_notifiers(self) -> list[WebhookNotifier]:
        """One tracked subscriber per ``[[webhook]]`` subscription: it writes the
        delivery records with its position."""
        return [
            WebhookNotifier(
                self.store,
                self.views,
                w.id,
                w.events,
                w.actor_id,
                now=self.clock.now,
                name=w.subscriber_name,
                start_now=w.start == "now",
            )
            for w in self.webhooks
        ]

    def make_deliverer(self, **overrides: Any) -> Deliverer:
        """The sender of the pending deliveries (tests inject transport, random)."""
        from adapters.webhooks.deliverer import Deliverer

        def counted(outcome: str) -> None:
            self.metrics.inc("ledger_webhook_deliveries_total", outcome=outcome)

        overrides.setdefault("max_seconds", float(self.settings.webhook_backoff_max_seconds))
        return Deliverer(
            self.views, {w.id: w for w in self.webhooks}, self.clock, on_result=counted, **overrides
        )

    def projection_lag(self) -> dict[str, Lag]:
        """Each subscriber's lag that this process can know (for /readyz and /metrics)."""
        now = self.clock.now()
        found: dict[str, Lag] = {}
        for subscriber in self.subscribers():
            lag = self.backend.lag(subscriber.name, now)
            if lag is not None:
                found[subscriber.name] = lag
        return found

    def worker_policy(self) -> WorkerPolicy:
        """The worker policy the settings describe."""
        return policy_from_settings(self.settings)

    def make_worker(self) -> Worker:
        return Worker(self.context, self.worker_policy())

    @property
    def context(self) -> ServiceContext:
        """The ports every use case receives (built once, see the class)."""
        if self._context is None:
            tracer = self._tracer
            self._context = ServiceContext(
                store=TracedStore(self.store, tracer) if self.tracing else self.store,
                clock=self.clock,
                tokens=self.tokens,
                permissions=frozenset(self.settings.permissions),
                renderer=self.renderer,
                registry=InstrumentedRegistry(self.registry, self.metrics, tracer),
                presentation_ttl_seconds=self.settings.presentation_ttl_seconds,
                tracer=tracer,
                max_active_presentations=self.settings.max_active_presentations,
                cache=self.read_cache,
                no_effect_watch=self.settings.no_effect_watch_seconds,
            )
        return self._context

    def ready(self) -> bool:
        """True when the store answers a read."""
        try:
            self.store.version_of("readiness-probe")
        except Exception:
            return False
        return True

    def close(self) -> None:
        self.registry.close()
        if isinstance(self.effects, FileEffectLedger):
            self.effects.close()
        self.store.recorder.close()


def build_ledger(
    settings: Settings,
    *,
    clock: Clock | None = None,
    tokens: TokenSource | None = None,
    recorder: LedgerRecorder | None = None,
    backend: Backend | None = None,
    dynamodb_client: DynamoDBClient | None = None,
    dynamodb_streams_client: DynamoDBStreamsClient | None = None,
) -> Ledger:
    """Wire a ledger from settings; tests inject clock, tokens, a recorder or a backend."""
    clock = clock or SystemClock()
    # Executors first: a bad plugin or executors file stops start-up before any store work.
    executors = load_executors(settings, clock=clock)
    if backend is None:
        backend = (
            backend_for(recorder)
            if recorder is not None
            else build_backend(
                settings,
                dynamodb_client=dynamodb_client,
                dynamodb_streams_client=dynamodb_streams_client,
            )
        )
    registry, effects = executors.registry, executors.effects
    ledger = Ledger(
        settings=settings,
        store=LedgerStore(backend.recorder),
        clock=clock,
        tokens=tokens or SecretsTokenSource(),
        registry=registry,
        effects=effects,
        views=NotifyingViewStore(backend.views),  # wakes long polls after a write
        backend=backend,
        webhooks=list(executors.webhooks),
        read_cache=ReadCache(settings.read_cache_entries),
    )
    ledger.metrics.add_gauge_source(
        view_gauges(
            ledger.views,
            ledger.store,
            ledger.clock,
            statuses=[s.value for s in AttemptStatus],
            waiting_for_build_seconds=settings.waiting_for_build_seconds,
        )
    )
    ledger.metrics.add_gauge_source(lag_gauges(ledger.projection_lag))
    ledger.metrics.add_gauge_source(webhook_gauges(ledger.views, lambda: bool(ledger.webhooks)))
    return ledger
