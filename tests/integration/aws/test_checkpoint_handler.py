"""The scheduled checkpoint function: a digest of the emulator's table, put into
the emulator's S3, that a later verify accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.audit.digests import verify_ledger
from adapters.aws_lambda import checkpoint
from adapters.bootstrap import Ledger, build_ledger
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.settings import SettingsError, load_settings
from domain.digest import Digest
from tests.support.aws_lambda import FakeLambdaContext, use_ledger, use_s3
from tests.support.worlds.approval import FixedClock
from tests.support.worlds.execution import ExecutionWorld

pytestmark = pytest.mark.dynamodb


@pytest.fixture
def s3(dynamodb_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=dynamodb_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    use_s3(monkeypatch, client)
    return client


def test_the_checkpoint_lands_in_the_bucket_and_verifies(
    dynamodb_recorder: DynamoDBLedgerRecorder,
    s3: Any,
    context: FakeLambdaContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = "ledger-checkpoints-test"
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    ledger: Ledger = build_ledger(
        load_settings(store="dynamodb", env="test", audit_checkpoint_bucket=bucket),
        clock=FixedClock(),
        recorder=dynamodb_recorder,
    )
    world = ExecutionWorld(ledger.store, registry=ledger.registry, effects=ledger.effects)
    attempt_id = world.approved("provider_idempotency")
    world.worker().process(attempt_id)
    use_ledger(monkeypatch, ledger)

    answer = checkpoint.handler({}, context)
    assert answer["key"].startswith("digests/") and answer["stream_count"] >= 8
    body = s3.get_object(Bucket=bucket, Key=answer["key"])["Body"].read()
    digest = Digest.from_json(json.loads(body))
    assert digest.root == answer["root"] and digest.root_matches_heads()
    assert attempt_id in {h.stream_id for h in digest.heads}
    assert verify_ledger(ledger.store, digest).ok


def test_without_a_bucket_the_function_fails_with_one_line(
    dynamodb_recorder: DynamoDBLedgerRecorder,
    context: FakeLambdaContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_ledger(
        monkeypatch,
        build_ledger(load_settings(store="dynamodb", env="test"), recorder=dynamodb_recorder),
    )
    with pytest.raises(SettingsError, match="LEDGER_AUDIT_CHECKPOINT_BUCKET"):
        checkpoint.handler({}, context)
