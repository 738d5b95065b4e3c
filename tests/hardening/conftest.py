"""Hardening fixtures: the approval / execution worlds on memory, SQLite and DynamoDB."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.executors.fake import EffectLedger, register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from tests.integration.approval.conftest import store
from tests.integration.approval.world import World, check_approval_invariants
from tests.integration.execution.crash import ExecutionWorld

__all__ = ["store"]


@pytest.fixture
def xworld(store: LedgerStore) -> ExecutionWorld:
    registry = StaticExecutorRegistry()
    effects: EffectLedger = register_fakes(registry)
    return ExecutionWorld(store, registry=registry, effects=effects)


@pytest.fixture
def world(store: LedgerStore) -> Iterator[World]:
    """The approval world; I1-I3 are checked on the raw store after the test."""
    created = World(store)
    yield created
    check_approval_invariants(store, created.tokens.proposal_ids, created.clock.now())
