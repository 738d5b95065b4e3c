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


@dataclass
class Ledger:
    """Everything an entry point needs, wired once."""

    settings: Settings
    store: LedgerStore
    clock: Clock = field(default_factory=SystemClock)
    tokens: TokenSource = field(default_factory=SecretsTokenSource)
    registry: StaticExecutorRegistry = field(default_factory=StaticExecutorRegistry)
    renderer: Renderer = field(default_factory=TextRenderer)
    effects: EffectLedger | FileEffectLedger | None = None
    views: TrackedViewStore | None = None
    metrics: Metrics = field(default_factory=Metrics)
    backend: Backend | None = None
    webhooks: list[WebhookSubscription] = field(default_factory=list)
    read_cache: ReadCache | None = None  # one per process: every context shares it

    def __post_init__(self) -> None:
        if self.read_cache is None:
            self.read_cache = ReadCache(self.settings.read_cache_entries)
        if self.backend is None:
            self.backend = backend_for(self.store.recorder)
        if self.views is None:
            self.views = self.backend.views

    tracer: Tracer | None = None  # None: no spans (``adapters.tracing`` builds one from OTEL_*)

    @property
    def projector(self) -> Projector:
        """Applies attempt streams to the views."""
        assert self.views is not None
        return Projector(self.store, self.views)

    def subscribers(self) -> list[Subscriber]:
        """Every subscriber of the log this ledger keeps: the status projector,
        then one webhook notifier per subscription (SPEC 12)."""
        return [self.projector, *self.webhook_notifiers()]

    def webhook_notifiers(self) -> list[WebhookNotifier]:
        """One tracked subscriber per ``[[webhook]]`` subscription: it writes the
        delivery records with its position."""
        assert self.views is not None
        return [
            WebhookNotifier(
                self.store,
                self.views,
                w.id,
                w.events,
                w.actor_id,
                now=self.clock.now,
                name=w.subscriber_name,
            )
            for w in self.webhooks
        ]

    def make_deliverer(self, **overrides: Any) -> Deliverer:
        """The sender of the pending deliveries (tests inject transport, random)."""
        from adapters.webhooks.deliverer import Deliverer

        assert self.views is not None

        def counted(outcome: str) -> None:
            self.metrics.inc("ledger_webhook_deliveries_total", outcome=outcome)

        return Deliverer(
            self.views, {w.id: w for w in self.webhooks}, self.clock, on_result=counted, **overrides
        )

    def projection_lag(self) -> dict[str, Lag]:
        """Each subscriber's lag that this process can know (for /readyz and /metrics)."""
        assert self.backend is not None
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
        """The ports every use case receives."""
        return ServiceContext(
            store=self.store if self.tracer is None else TracedStore(self.store, self.tracer),
            clock=self.clock,
            tokens=self.tokens,
            permissions=frozenset(self.settings.permissions),
            renderer=self.renderer,
            registry=InstrumentedRegistry(self.registry, self.metrics, self.tracer),
            presentation_ttl_seconds=self.settings.presentation_ttl_seconds,
            tracer=self.tracer or NullTracer(),
            max_active_presentations=self.settings.max_active_presentations,
            cache=ReadCache(0) if self.read_cache is None else self.read_cache,
            no_effect_watch=self.settings.no_effect_watch_seconds,
        )

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
    )
    ledger.metrics.add_gauge_source(
        view_gauges(
            ledger.views, ledger.store, ledger.clock, statuses=[s.value for s in AttemptStatus]
        )
    )
    ledger.metrics.add_gauge_source(lag_gauges(ledger.projection_lag))
    ledger.metrics.add_gauge_source(webhook_gauges(ledger.views, lambda: bool(ledger.webhooks)))
    return ledger
