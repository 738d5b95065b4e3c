"""Pytest plugin: the approval world (``world``) and the execution world (``xworld``)
on the ``store`` fixture; after every test that used ``world``, I1-I3 are checked on
the raw store for every proposal the test created."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.executors.fake import EffectLedger, register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from tests.support.worlds.approval import World, check_approval_invariants
from tests.support.worlds.execution import ExecutionWorld


@pytest.fixture
def world(store: LedgerStore) -> Iterator[World]:
    """The approval world; after every test, I1-I3 are checked on the raw store
    for every proposal the test created."""
    created = World(store)
    yield created
    check_approval_invariants(store, created.tokens.proposal_ids, created.clock.now())


@pytest.fixture
def xworld(store: LedgerStore) -> ExecutionWorld:
    """The approval world with the real fake executors."""
    registry = StaticExecutorRegistry()
    effects: EffectLedger = register_fakes(registry)
    return ExecutionWorld(store, registry=registry, effects=effects)
