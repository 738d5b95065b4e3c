"""The worker's feeds: the embedded notification log and real DynamoDB stream records."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from adapters.backend import NotificationLogFeed
from adapters.bootstrap import build_ledger
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.streams import DynamoDBStreamFeed
from adapters.executors.fake import fake_build_digest
from adapters.runtime import Runtime, make_worker
from adapters.settings import load_settings
from adapters.sqlite.recorder import SQLiteLedgerRecorder
from adapters.store import LedgerStore
from adapters.streams import MalformedRecord, work_from_record, work_from_records
from api.testing import open_test_ledger
from domain.attempt import ExecutionAttempt
from domain.services.approval import approve
from tests.support.worlds.approval import World
from tests.support.worlds.execution import ExecutionWorld


def world_on(ledger_store: LedgerStore, registry: Any, effects: Any) -> ExecutionWorld:
    return ExecutionWorld(ledger_store, registry=registry, effects=effects)


def approve_one(world: World) -> str:
    capability = "fake.provider_idempotency"
    proposal_id = world.propose(capability=capability, executor_build=fake_build_digest(capability))
    return approve(
        world.ctx, token=world.present(proposal_id).token, provenance=world.who
    ).attempt_id


def until(predicate: Any, seconds: float = 20.0) -> Any:
    """Poll (bounded) until predicate() is truthy; returns its value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def test_notification_log_feed_yields_each_queued_attempt_once(tmp_path: Path) -> None:
    with open_test_ledger(store="sqlite", sqlite_path=str(tmp_path / "l.db")) as ledger:
        recorder = ledger.wiring.store.recorder
        assert isinstance(recorder, SQLiteLedgerRecorder)
        feed = NotificationLogFeed(recorder)
        alice = ledger.add_approver()
        first, second = (ledger.approved(alice, ledger.fake_spec()) for _ in range(2))
        assert feed.poll(0) == [first, second]
        assert feed.poll(0) == []
        assert ledger.process(first).value == "succeeded"
        assert feed.poll(0) == []  # results are not work


def test_runtime_executes_approved_attempts_on_the_embedded_store(tmp_path: Path) -> None:
    settings = load_settings(store="sqlite", sqlite_path=str(tmp_path / "l.db"))
    ledger = build_ledger(settings)
    recorder = ledger.store.recorder
    assert isinstance(recorder, SQLiteLedgerRecorder)
    runtime = Runtime(
        ledger, NotificationLogFeed(recorder), recovery_interval=3600, poll_seconds=0.02
    )
    runtime.start()
    try:
        world = world_on(ledger.store, ledger.registry, ledger.effects)
        attempt_id = approve_one(world)

        def settled() -> str | None:
            attempt = ledger.store.get(ExecutionAttempt, attempt_id)
            return (
                attempt.status.value
                if attempt and attempt.status != "queued" and (attempt.status != "executing")
                else None
            )

        assert until(settled) == "succeeded"
    finally:
        runtime.stop()
        ledger.close()


@pytest.mark.dynamodb
def test_real_stream_records_drive_the_worker(
    dynamodb_recorder: DynamoDBLedgerRecorder, dynamodb_endpoint: str
) -> None:
    import boto3

    streams = boto3.client(
        "dynamodbstreams",
        endpoint_url=dynamodb_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    table = dynamodb_recorder.client.describe_table(TableName=dynamodb_recorder.table_name)
    feed = DynamoDBStreamFeed(streams, table["Table"]["LatestStreamArn"])
    settings = load_settings(store="memory")
    ledger = build_ledger(settings, recorder=dynamodb_recorder)
    world = world_on(ledger.store, ledger.registry, ledger.effects)
    attempt_id = approve_one(world)
    found: list[str] = []

    def polled() -> bool:
        found.extend(feed.poll(0.05))
        return attempt_id in found

    until(polled)
    assert found.count(attempt_id) == 1
    assert make_worker(ledger).process(attempt_id).value == "succeeded"


def test_stream_record_parsing() -> None:
    queued = {
        "eventName": "INSERT",
        "dynamodb": {
            "NewImage": {
                "pk": {"S": "att_1"},
                "topic": {"S": "domain.attempt:ExecutionAttempt.Queued"},
            }
        },
    }
    result = {
        "eventName": "INSERT",
        "dynamodb": {
            "NewImage": {
                "pk": {"S": "att_1"},
                "topic": {"S": "domain.attempt:ExecutionAttempt.ResultRecorded"},
            }
        },
    }
    modify = {"eventName": "MODIFY", "dynamodb": {"NewImage": {"pk": {"S": "due#att_1"}}}}
    assert work_from_record(queued) == "att_1"
    assert work_from_record(result) is None
    assert work_from_record(modify) is None
    with pytest.raises(MalformedRecord):
        work_from_record({"eventName": "INSERT", "dynamodb": {}})
    assert work_from_records([queued, queued, {"eventName": "INSERT"}, result]) == ["att_1"]


def test_execution_switch_off_runs_only_the_projector(tmp_path: Path) -> None:
    from adapters.runtime import build_runtime

    ledger = build_ledger(
        load_settings(store="sqlite", sqlite_path=str(tmp_path / "l.db"), execution_enabled=False)
    )
    runtime = build_runtime(ledger)
    assert runtime.feed is None and runtime.recovery is False
    assert [run.subscriber.name for run in runtime.subscribers] == ["status"]
    on = build_runtime(
        build_ledger(load_settings(store="sqlite", sqlite_path=str(tmp_path / "m.db")))
    )
    assert on.feed is not None and on.recovery is True
    ledger.close()
