"""Recovery reads the due-work index with queries, never a scan (on the emulator)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.executors.fake import register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from domain.services.recovery import run_recovery
from tests.support.worlds.execution import ExecutionWorld


@pytest.mark.dynamodb
def test_recovery_issues_no_scan(dynamodb_recorder: DynamoDBLedgerRecorder) -> None:
    registry = StaticExecutorRegistry()
    world = ExecutionWorld(
        LedgerStore(dynamodb_recorder), registry=registry, effects=register_fakes(registry)
    )
    due = [world.approved("provider_idempotency") for _ in range(3)]
    done = world.approved("provider_idempotency")
    world.worker().process(done)

    calls: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        calls[event_name.rsplit(".", 1)[-1]] += 1

    events = dynamodb_recorder.client.meta.events
    events.register("before-call.dynamodb", count)
    try:
        report = run_recovery(world.worker())
    finally:
        events.unregister("before-call.dynamodb", count)
    assert report.outcomes["succeeded"] == len(due)
    assert calls["Scan"] == 0
    assert calls["Query"] > 0
    assert all(world.attempt(a).status == "succeeded" for a in due)
