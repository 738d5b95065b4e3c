"""The one wiring point: settings -> store, clock, tokens, services."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.executors.fake import EffectLedger, register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.metrics import Metrics
from adapters.recorder import LedgerRecorder
from adapters.settings import Settings, StoreKind
from adapters.store import LedgerStore
from adapters.system import SecretsTokenSource, SystemClock
from adapters.view_changes import NotifyingViewStore
from domain.ports import Clock, Renderer, TokenSource
from domain.rendering import TextRenderer
from domain.services.context import ServiceContext
from projections.ports import ViewStore
from projections.projector import Projector


def build_recorder(settings: Settings, *, dynamodb_client: Any = None) -> LedgerRecorder:
    """The recorder the settings choose; creates the embedded schema if needed."""
    if settings.store is StoreKind.MEMORY:
        from adapters.memory.recorder import MemoryLedgerRecorder

        return MemoryLedgerRecorder()
    if settings.store is StoreKind.SQLITE:
        from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore

        path = settings.sqlite_path
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        recorder = SQLiteLedgerRecorder(open_datastore(path))
        recorder.create_table()
        return recorder
    from adapters.dynamodb.recorder import DynamoDBLedgerRecorder

    return DynamoDBLedgerRecorder(
        table_name=settings.dynamodb_table,
        client=dynamodb_client,
        due_buckets=settings.due_work_buckets,
    )


def build_views(recorder: LedgerRecorder) -> ViewStore:
    """The view store living beside the recorder's events (same file or table)."""
    from adapters.memory.recorder import MemoryLedgerRecorder
    from adapters.sqlite.recorder import SQLiteLedgerRecorder

    if isinstance(recorder, MemoryLedgerRecorder):
        from adapters.memory.views import MemoryViewStore

        return MemoryViewStore()
    if isinstance(recorder, SQLiteLedgerRecorder):
        from adapters.sqlite.views import SQLiteViewStore

        return SQLiteViewStore(recorder.datastore)
    from adapters.dynamodb.views import DynamoDBViewStore

    return DynamoDBViewStore(recorder.client, recorder.table_name,  # type: ignore[attr-defined]
                             retrier=recorder.retrier)  # type: ignore[attr-defined]


@dataclass
class Ledger:
    """Everything an entry point needs, wired once."""

    settings: Settings
    store: LedgerStore
    clock: Clock = field(default_factory=SystemClock)
    tokens: TokenSource = field(default_factory=SecretsTokenSource)
    registry: StaticExecutorRegistry = field(default_factory=StaticExecutorRegistry)
    renderer: Renderer = field(default_factory=TextRenderer)
    effects: EffectLedger | None = None
    views: ViewStore | None = None
    metrics: Metrics = field(default_factory=Metrics)

    @property
    def projector(self) -> Projector:
        """Applies attempt streams to the views."""
        assert self.views is not None
        return Projector(self.store, self.views)

    @property
    def context(self) -> ServiceContext:
        """The ports every use case receives."""
        return ServiceContext(
            store=self.store,
            clock=self.clock,
            tokens=self.tokens,
            permissions=frozenset(self.settings.permissions),
            renderer=self.renderer,
            registry=self.registry,
            presentation_ttl_seconds=self.settings.presentation_ttl_seconds,
            max_active_presentations=self.settings.max_active_presentations,
        )

    def ready(self) -> bool:
        """True when the store answers a read."""
        try:
            self.store.version_of("readiness-probe")
        except Exception:
            return False
        return True

    def close(self) -> None:
        self.store.recorder.close()


def build_ledger(
    settings: Settings,
    *,
    clock: Clock | None = None,
    tokens: TokenSource | None = None,
    recorder: LedgerRecorder | None = None,
    dynamodb_client: Any = None,
) -> Ledger:
    """Wire a ledger from settings; tests inject clock, tokens or a recorder."""
    chosen = recorder or build_recorder(settings, dynamodb_client=dynamodb_client)
    store = LedgerStore(chosen)
    registry = StaticExecutorRegistry()
    effects = register_fakes(registry) if settings.fake_executors_enabled else None
    return Ledger(
        settings=settings,
        store=store,
        clock=clock or SystemClock(),
        tokens=tokens or SecretsTokenSource(),
        registry=registry,
        effects=effects,
        views=NotifyingViewStore(build_views(chosen)),  # wakes long polls after a write
    )
