"""The API handler (Mangum over the app), cold-start settings, log redaction, conflict count."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from adapters.aws_lambda import common, worker
from adapters.aws_lambda.common import CONTENT_KEYS, make_logger
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.settings import SettingsError
from api import aws_lambda as api_lambda
from domain.attempt import ExecutionAttempt
from domain.errors import ConcurrencyConflict
from domain.ports import Commit
from domain.redaction import REDACTED, redact
from tests.support.aws_lambda import FakeLambdaContext, fresh_api_app, use_ledger, wire
from tests.support.clocks import FixedClock
from tests.support.worlds.execution import ExecutionWorld


def http_event(method: str, path: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event."""
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"host": "api.example.test", **(headers or {})},
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "api",
            "domainName": "api.example.test",
            "requestId": "r1",
            "routeKey": "$default",
            "stage": "$default",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "test",
            },
        },
        "isBase64Encoded": False,
    }


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> None:
    use_ledger(monkeypatch, wire(MemoryLedgerRecorder(), FixedClock()))
    fresh_api_app(monkeypatch)


def test_api_handler_serves_the_app_through_the_http_api_event(
    api: None, context: FakeLambdaContext
) -> None:
    answer = api_lambda.handler(http_event("GET", "/healthz"), context)
    assert answer["statusCode"] == 200
    assert json.loads(answer["body"]) == {"status": "ok"}
    assert api_lambda.handler(http_event("GET", "/readyz"), context)["statusCode"] == 200


def test_api_handler_requires_a_bearer_token(api: None, context: FakeLambdaContext) -> None:
    answer = api_lambda.handler(
        http_event("GET", "/api/conversational/execution-attempts/att_x"), context
    )
    assert answer["statusCode"] == 401


@pytest.mark.filterwarnings("ignore:No application metrics")
def test_invalid_settings_fail_the_first_invocation_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, context: FakeLambdaContext
) -> None:
    # Importing the handlers read nothing: the bad value is only seen now.
    monkeypatch.setenv("LEDGER_STORE", "dynamodb")
    monkeypatch.setenv("LEDGER_LEASE_SECONDS", "1")
    with pytest.raises(SettingsError, match="LEDGER_LEASE_SECONDS") as caught:
        worker.handler({"mode": "recovery"}, context)
    assert "\n" not in str(caught.value)


def test_lambda_functions_refuse_an_embedded_store_and_create_no_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "ledger.db"
    monkeypatch.setenv("LEDGER_STORE", "sqlite")
    monkeypatch.setenv("LEDGER_SQLITE_PATH", str(path))
    with pytest.raises(SettingsError, match="LEDGER_STORE"):
        common.get_ledger()
    assert not path.exists()


@pytest.mark.dynamodb
def test_cold_start_builds_the_ledger_without_creating_any_table(
    monkeypatch: pytest.MonkeyPatch, dynamodb_endpoint: str, dynamodb_client: Any
) -> None:
    name = "ledger-test-cold-start-not-created"
    for key, value in {
        "LEDGER_STORE": "dynamodb",
        "LEDGER_DYNAMODB_TABLE": name,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(key, value)
    ledger = common.get_ledger()
    assert common.get_ledger() is ledger  # cached for the execution environment
    assert ledger.settings.dynamodb_table == name
    assert name not in dynamodb_client.list_tables()["TableNames"]
    ledger.close()


def test_redact_removes_secret_shaped_and_content_bearing_values() -> None:
    line = {
        "message": "stream record failed",
        "authorization": "Bearer abc.def.ghi",
        "detail": {"token": "t0k3n", "attempt_id": "att_1", "spec": {"content": "x"}},
        "note": "password=hunter2",
        "NewImage": {"pk": {"S": "prop_1"}},
        "reason": "malformed_record",
    }
    assert redact(line, CONTENT_KEYS) == {
        "message": "stream record failed",
        "authorization": REDACTED,
        "detail": {"token": REDACTED, "attempt_id": "att_1", "spec": REDACTED},
        "note": REDACTED,
        "NewImage": REDACTED,
        "reason": "malformed_record",
    }


def test_handler_logger_redacts_what_a_careless_caller_passes() -> None:
    buffer = io.StringIO()
    logger = make_logger("ledger-test")
    logger.registered_handler.setStream(buffer)  # type: ignore[attr-defined]
    logger.info("oops", extra={"secret": "s3cr3t-value", "state": "c3RhdGU=", "pk": "att_1"})
    written = json.loads(buffer.getvalue())
    assert written["secret"] == REDACTED and written["state"] == REDACTED
    assert written["pk"] == "att_1"
    assert "s3cr3t-value" not in buffer.getvalue()


def test_worker_counts_the_appends_it_loses_as_lease_conflicts() -> None:
    ledger = wire(MemoryLedgerRecorder(), FixedClock())
    assert isinstance(ledger.clock, FixedClock) and ledger.effects is not None
    world = ExecutionWorld(
        ledger.store, clock=ledger.clock, registry=ledger.registry, effects=ledger.effects
    )
    attempt_id = world.approved("provider_idempotency")
    _, counting = worker._worker(ledger)
    now = ledger.clock.now()
    first, second = (ledger.store.get(ExecutionAttempt, attempt_id) for _ in range(2))
    assert first is not None and second is not None
    first.lease(owner="one", now=now, lease_seconds=60)
    counting.commit(Commit(aggregates=[first]))
    second.lease(owner="two", now=now, lease_seconds=60)
    with pytest.raises(ConcurrencyConflict):
        counting.commit(Commit(aggregates=[second]))
    assert counting.conflicts == 1
