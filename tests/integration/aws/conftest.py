"""The Lambda handlers in-process, on a ledger over the DynamoDB emulator, fed
the table's real DynamoDB Streams records (helpers in tests/support/aws_lambda.py)."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import pytest

from adapters.aws_lambda import projector, worker
from adapters.bootstrap import Ledger
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from tests.support.aws_lambda import FakeLambdaContext, StreamTap, use_ledger, wire
from tests.support.clocks import FixedClock
from tests.support.worlds.execution import ExecutionWorld


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LEDGER_* variable leaks in, and no ledger built in another test either."""
    for name in list(os.environ):
        if name.startswith("LEDGER_"):
            monkeypatch.delenv(name)
    use_ledger(monkeypatch)


@pytest.fixture
def context() -> FakeLambdaContext:
    return FakeLambdaContext()


@pytest.fixture
def ledger(dynamodb_recorder: DynamoDBLedgerRecorder, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    """The ledger the handlers use."""
    wired = wire(dynamodb_recorder)
    use_ledger(monkeypatch, wired)
    return wired


@pytest.fixture
def world(ledger: Ledger) -> ExecutionWorld:
    assert isinstance(ledger.clock, FixedClock)
    assert ledger.effects is not None
    return ExecutionWorld(
        ledger.store, clock=ledger.clock, registry=ledger.registry, effects=ledger.effects
    )


@pytest.fixture
def stream(dynamodb_recorder: DynamoDBLedgerRecorder, dynamodb_endpoint: str) -> StreamTap:
    import boto3

    client = boto3.client(
        "dynamodbstreams",
        endpoint_url=dynamodb_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    table = dynamodb_recorder.client.describe_table(TableName=dynamodb_recorder.table_name)
    return StreamTap(client, table["Table"]["LatestStreamArn"])


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """Everything the handlers log, as written (after redaction)."""
    buffer = io.StringIO()
    handlers = [m.logger.registered_handler for m in (worker, projector)]
    previous = [h.setStream(buffer) for h in handlers]
    yield buffer
    for handler, stream in zip(handlers, previous, strict=True):
        handler.setStream(stream)
