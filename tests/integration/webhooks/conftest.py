"""Webhook fixtures: the execution world on every backend and a real receiver
process on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.executors.fake import register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from tests.support.webhook_receiver import Receiver
from tests.support.webhooks import SECRET
from tests.support.worlds.execution import ExecutionWorld


@pytest.fixture
def pworld(store: LedgerStore) -> ExecutionWorld:
    registry = StaticExecutorRegistry()
    return ExecutionWorld(store, registry=registry, effects=register_fakes(registry))


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    running = Receiver(tmp_path, SECRET, stall_seconds=2.0).start()
    yield running
    running.stop()
