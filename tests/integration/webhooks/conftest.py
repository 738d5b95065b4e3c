"""Webhook fixtures: the execution world on every backend, a ledger with
subscriptions, and a real receiver process on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.bootstrap import Ledger, backend_for, build_ledger
from adapters.executors.fake import register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.runtime import Runtime, subscriber_runs
from adapters.settings import load_settings
from adapters.store import LedgerStore
from adapters.webhooks.config import WebhookSubscription
from domain.notifications import NotificationType
from tests.support.webhook_receiver import Receiver

from ..approval.conftest import store
from ..execution.crash import ExecutionWorld

__all__ = ["store"]

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
EVERYTHING = frozenset(NotificationType)


@pytest.fixture
def pworld(store: LedgerStore) -> ExecutionWorld:
    registry = StaticExecutorRegistry()
    return ExecutionWorld(store, registry=registry, effects=register_fakes(registry))


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    running = Receiver(tmp_path, SECRET, stall_seconds=2.0).start()
    yield running
    running.stop()


def subscription(url: str, sub_id: str = "chat", *, actor_id: str | None = None,
                 events: frozenset[NotificationType] = EVERYTHING,
                 timeout: float = 0.5) -> WebhookSubscription:
    return WebhookSubscription(id=sub_id, url=url, secret_env="LEDGER_WEBHOOK_SECRET",
                               events=events, actor_id=actor_id, timeout_seconds=timeout,
                               secret=SECRET)


def webhook_ledger(store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest,
                   subscriptions: list[WebhookSubscription], backend: Any = None) -> Ledger:
    if backend is None:
        backend = backend_for(store.recorder)
        if backend.kind == "dynamodb":
            from adapters.dynamodb.backend import DynamoDBBackend

            from ..projections.test_tracked_subscriber import streams_client

            endpoint = request.getfixturevalue("dynamodb_endpoint")
            backend = DynamoDBBackend(store.recorder,  # type: ignore[arg-type]
                                      streams_client=streams_client(endpoint))
    ledger = build_ledger(load_settings(store="memory", env="test"), backend=backend,
                          clock=pworld.clock)
    ledger.webhooks = list(subscriptions)
    return ledger


def restarted(ledger: Ledger) -> Ledger:
    """The same store and subscriptions as a new process sees them."""
    assert ledger.backend is not None
    again = build_ledger(ledger.settings, backend=ledger.backend.reopen(), clock=ledger.clock)
    again.webhooks = list(ledger.webhooks)
    return again


def drain(ledger: Ledger) -> int:
    """Run every subscriber until it is caught up; steps taken."""
    runtime = Runtime(ledger, None, recovery_interval=3600, recovery=False, poll_seconds=0)
    steps = 0
    for run in subscriber_runs(ledger):
        while runtime.run_subscriber_once(run):
            steps += 1
            assert steps < 1000
    return steps
