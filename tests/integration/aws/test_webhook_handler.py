"""The webhook Lambda handler fed the table's real DynamoDB Streams records, sending
to a real receiver on loopback: delivery records written once per fact, sent once,
a replayed batch changing nothing, a down receiver never failing the batch (the
scheduled pass sends later), a malformed record a batch item failure."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.aws_lambda import webhooks
from adapters.bootstrap import Ledger
from adapters.webhooks.deliverer import BACKOFF_MAX_SECONDS
from domain.services.decisions import decline
from projections.webhooks import delivery_list_key
from tests.support.aws_lambda import FakeLambdaContext, StreamTap, metric_total, without_image
from tests.support.sam_template import filter_patterns, load_template, passes
from tests.support.webhook_receiver import Receiver
from tests.support.webhooks import SECRET, subscription
from tests.support.worlds.execution import ExecutionWorld

pytestmark = pytest.mark.dynamodb

CONTENT = "Buy milk"


@pytest.fixture(scope="module")
def webhook_filter() -> list[dict[str, Any]]:
    return filter_patterns(load_template()["Resources"]["WebhookFunction"], "LedgerEvents")


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    running = Receiver(tmp_path, SECRET).start()
    yield running
    running.stop()


@pytest.fixture
def hooked(ledger: Ledger, receiver: Receiver) -> Ledger:
    ledger.webhooks = [subscription(receiver.url, "chat", timeout=2)]
    return ledger


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    buffer = io.StringIO()
    handler = webhooks.logger.registered_handler
    previous = handler.setStream(buffer)
    yield buffer
    handler.setStream(previous)


def count(ledger: Ledger, status: str) -> int:
    assert ledger.views is not None
    rows, _ = ledger.views.list_views(delivery_list_key(status), 100)
    return len(rows)


def facts(world: ExecutionWorld) -> None:
    """One succeeded attempt and one declined proposal."""
    attempt_id = world.approved("provider_idempotency")
    world.worker().process(attempt_id)
    proposal_id = world.propose()
    decline(world.ctx, token=world.present(proposal_id).token, provenance=world.who)


def test_a_batch_records_and_sends_each_fact_once_and_a_replay_changes_nothing(
    hooked: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    receiver: Receiver,
    webhook_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    logs: io.StringIO,
    capsys: pytest.CaptureFixture[str],
) -> None:
    facts(world)
    records = [r for r in stream.records() if passes(webhook_filter, r)]
    assert len(records) >= 6

    assert webhooks.handler({"Records": records}, context) == {"batchItemFailures": []}
    assert count(hooked, "delivered") == 2 and count(hooked, "pending") == 0
    acknowledged = receiver.acknowledged()
    assert sorted(acknowledged.values()) == [1, 1]
    out = capsys.readouterr().out
    assert metric_total(out, "DeliveriesRecorded", service=webhooks.SERVICE) == 2
    assert metric_total(out, "ledger_webhook_deliveries_total", outcome="delivered") == 2

    # Lambda delivers the batch again (a retry, a second shard reader): nothing new.
    assert webhooks.handler({"Records": records}, context) == {"batchItemFailures": []}
    assert receiver.acknowledged() == acknowledged
    assert metric_total(capsys.readouterr().out, "DeliveriesRecorded") == 0
    bodies = receiver.bodies()
    assert {b["type"] for b in bodies} == {"attempt.succeeded", "proposal.declined"}
    written = logs.getvalue()
    assert CONTENT not in written and SECRET not in written
    assert all(CONTENT not in e["body"] for e in receiver.entries())


def test_a_down_receiver_never_fails_the_batch_and_the_schedule_sends_later(
    hooked: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    receiver: Receiver,
    webhook_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
) -> None:
    facts(world)
    records = [r for r in stream.records() if passes(webhook_filter, r)]
    receiver.stop()
    assert webhooks.handler({"Records": records}, context) == {"batchItemFailures": []}
    assert count(hooked, "failing") == 2

    receiver.start()
    answer = webhooks.handler({"mode": "deliver"}, context)
    assert answer == {"mode": "deliver", "subscriptions": 1, "sent": 0}  # backoff not over
    hooked.clock.advance(BACKOFF_MAX_SECONDS + 1)  # type: ignore[attr-defined]
    assert webhooks.handler({"mode": "deliver"}, context)["sent"] == 2
    assert count(hooked, "delivered") == 2
    assert sorted(receiver.acknowledged().values()) == [1, 1]


def test_a_malformed_record_is_a_batch_item_failure_and_the_rest_is_recorded(
    hooked: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    receiver: Receiver,
    webhook_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
) -> None:
    facts(world)
    records = [r for r in stream.records() if passes(webhook_filter, r)]
    broken = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "42"}}
    malformed = without_image(records[0], "43")
    malformed["dynamodb"]["Keys"] = {}

    response = webhooks.handler({"Records": [*records, broken, malformed]}, context)
    assert response == {"batchItemFailures": [{"itemIdentifier": "42"}, {"itemIdentifier": "43"}]}
    assert count(hooked, "delivered") == 2


def test_without_subscriptions_the_function_records_nothing(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    webhook_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
) -> None:
    facts(world)
    records = [r for r in stream.records() if passes(webhook_filter, r)]
    assert webhooks.handler({"Records": records}, context) == {"batchItemFailures": []}
    assert webhooks.handler({"mode": "deliver"}, context)["sent"] == 0
    assert count(ledger, "pending") == count(ledger, "delivered") == 0


def test_the_scheduled_pass_records_and_sends_proposal_expired(
    hooked: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    receiver: Receiver,
    webhook_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
) -> None:
    proposal_id = world.propose()
    world.present(proposal_id)
    records = [r for r in stream.records() if passes(webhook_filter, r)]
    assert webhooks.handler({"Records": records}, context) == {"batchItemFailures": []}
    assert webhooks.handler({"mode": "deliver"}, context)["sent"] == 0

    hooked.clock.advance(2 * 86400)  # type: ignore[attr-defined]
    assert webhooks.handler({"mode": "deliver"}, context)["sent"] == 1
    assert webhooks.handler({"mode": "deliver"}, context)["sent"] == 0
    (body,) = receiver.bodies()
    assert (body["type"], body["proposal_id"], body["status"]) == (
        "proposal.expired",
        proposal_id,
        "expired",
    )
