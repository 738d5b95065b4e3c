"""Hardening fixtures: the approval / execution worlds on memory, SQLite and DynamoDB."""

from __future__ import annotations

import pytest

from adapters.executors.fake import EffectLedger, register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from tests.integration.approval.conftest import store
from tests.integration.execution.crash import ExecutionWorld

__all__ = ["store"]


@pytest.fixture
def xworld(store: LedgerStore) -> ExecutionWorld:
    registry = StaticExecutorRegistry()
    effects: EffectLedger = register_fakes(registry)
    return ExecutionWorld(store, registry=registry, effects=effects)
