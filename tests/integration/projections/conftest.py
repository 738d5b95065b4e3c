"""Projection fixtures: the execution world plus the backend's view store."""

from __future__ import annotations

import pytest

from adapters.bootstrap import build_views
from adapters.executors.fake import register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from projections.ports import ViewStore
from projections.projector import Projector
from tests.support.worlds.execution import ExecutionWorld


@pytest.fixture
def views(store: LedgerStore) -> ViewStore:
    return build_views(store.recorder)


@pytest.fixture
def pworld(store: LedgerStore) -> ExecutionWorld:
    registry = StaticExecutorRegistry()
    return ExecutionWorld(store, registry=registry, effects=register_fakes(registry))


@pytest.fixture
def projector(store: LedgerStore, views: ViewStore) -> Projector:
    return Projector(store, views)
