"""The Lambda handlers register the executors from the file packaged with the function
(production settings, the secret from its environment slot) and the worker carries a
real stream record to one effect at the reference provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.aws_lambda import common, worker
from adapters.executors.http import HttpExecutor
from domain.directory import DirectoryKind, executor_build_record_id
from domain.services.approval import approve
from tests.support.aws_lambda import FakeLambdaContext, StreamTap
from tests.support.provider_fixtures import Provider
from tests.support.sam_template import filter_patterns, load_template, passes
from tests.support.worlds.execution import ExecutionWorld

pytestmark = pytest.mark.dynamodb


@pytest.fixture
def packaged(
    tmp_path: Path,
    provider: Provider,
    monkeypatch: pytest.MonkeyPatch,
    dynamodb_endpoint: str,
    dynamodb_table_name: str,
) -> Path:
    """A function package root holding executors.toml, and the template's environment."""
    (tmp_path / "executors.toml").write_text(
        '[[http]]\ncapability = "tasks.create"\ndelivery_mode = "provider_idempotency"\n'
        f'url = "{provider.url}/v1/{{destination}}"\n'
        'headers = { Authorization = "env:LEDGER_EXECUTOR_SECRET_1" }\n'
        'receipt = ["/id"]\n'
    )
    for key, value in {
        "LAMBDA_TASK_ROOT": str(tmp_path),
        "LEDGER_EXECUTORS_FILE": "executors.toml",
        "LEDGER_EXECUTOR_SECRET_1": f"Bearer {provider.token}",
        "LEDGER_ENV": "production",
        "LEDGER_AUTH_HS256_SECRET": "s" * 40,
        "LEDGER_STORE": "dynamodb",
        "LEDGER_DYNAMODB_TABLE": dynamodb_table_name,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(key, value)
    return tmp_path


def test_the_worker_function_executes_with_the_packaged_http_executor(
    packaged: Path,
    provider: Provider,
    context: FakeLambdaContext,
    dynamodb_endpoint: str,
) -> None:
    import boto3

    ledger = common.get_ledger()
    try:
        (entry,) = ledger.registry.entries()  # production: the file's executor, no fake
        assert (entry.capability, entry.kind) == ("tasks.create", "http")
        executor = ledger.registry.get(entry.capability, entry.build_digest)
        assert isinstance(executor, HttpExecutor)
        world = ExecutionWorld(ledger.store, registry=ledger.registry)
        world.put(
            DirectoryKind.EXECUTOR_BUILD,
            executor_build_record_id(entry.capability, entry.build_digest),
            delivery_mode="provider_idempotency",
            available=True,
        )
        proposal = world.propose(capability=entry.capability, executor_build=entry.build_digest)
        attempt_id = approve(
            world.ctx, token=world.present(proposal).token, provenance=world.who
        ).attempt_id

        streams = boto3.client(
            "dynamodbstreams",
            endpoint_url=dynamodb_endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        table = ledger.store.recorder.client.describe_table(  # type: ignore[attr-defined]
            TableName=ledger.settings.dynamodb_table
        )
        tap = StreamTap(streams, table["Table"]["LatestStreamArn"])
        patterns = filter_patterns(load_template()["Resources"]["WorkerFunction"], "QueuedAttempts")
        records: list[dict[str, Any]] = [r for r in tap.records() if passes(patterns, r)]
        answer = worker.handler({"Records": records + records}, context)  # and a duplicate
        assert answer == {"batchItemFailures": []}
        attempt = world.attempt(attempt_id)
        assert attempt.status.value == "succeeded"
        assert attempt.result is not None and set(attempt.result["receipt"]) == {"id"}
        assert provider.effects()[attempt.idempotency_key] == 1
    finally:
        ledger.close()
