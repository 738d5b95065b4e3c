"""One approval is one trace, from POST /approvals through the worker to the result.

The store's own feed (SQLite's notification log, the DynamoDB table's stream)
delivers the attempt; the worker runs with no ambient trace context (as another
process would) and continues the trace from the context stored on ``Queued``. Spans are
asserted with the SDK's in-memory exporter, on SQLite and on the emulator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters.bootstrap import Ledger, build_ledger
from adapters.executors.fake import fake_build_digest
from adapters.runtime import make_worker
from adapters.settings import load_settings
from adapters.tracing import OtelTracer
from api.http.app import create_app
from api.http.auth import mint_token
from domain.attempt import ExecutionAttempt
from domain.services.execution import Outcome
from domain.timeutil import format_utc
from tests.support.clocks import FixedClock
from tests.support.http_helpers import API, DIRECTORY, PROVENANCE, directory_puts, spec

# The worker's span hangs under the span the Queued event was created in.
EXPECTED_TREE = """\
POST /api/conversational/approvals
  ledger.approve
    ledger.store.commit
    ledger.worker.process
      ledger.worker.lease
        ledger.store.commit
      ledger.worker.dispatch_marker
        ledger.store.commit
      ledger.executor.call
      ledger.worker.record_result
        ledger.store.commit
"""


@pytest.fixture(params=["sqlite", pytest.param("dynamodb", marks=pytest.mark.dynamodb)])
def recorder_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    if request.param == "dynamodb":
        recorder = request.getfixturevalue("dynamodb_recorder")
        recorder.streams_endpoint = request.getfixturevalue("dynamodb_endpoint")
        return lambda: recorder

    def sqlite() -> Any:
        from adapters.bootstrap import build_recorder

        return build_recorder(
            load_settings(store="sqlite", env="test", sqlite_path=str(tmp_path / "ledger.db"))
        )

    return sqlite


@pytest.fixture
def traced(recorder_factory: Callable[[], Any]) -> Iterator[tuple[Ledger, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = recorder_factory()
    table = getattr(recorder, "table_name", "ledger")
    settings = load_settings(store="memory", env="test", dynamodb_table=table)
    backend = None
    endpoint = getattr(recorder, "streams_endpoint", None)
    if endpoint is not None:
        import boto3

        from adapters.dynamodb.backend import DynamoDBBackend

        backend = DynamoDBBackend(
            recorder,
            streams_client=boto3.client(
                "dynamodbstreams",
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            ),
        )
    ledger = build_ledger(settings, clock=FixedClock(), recorder=recorder, backend=backend)
    ledger.tracer = OtelTracer(provider)
    yield ledger, exporter
    ledger.close()


def work_feed(ledger: Ledger) -> Any:
    assert ledger.backend is not None
    return ledger.backend.work_feed()


def tree(spans: list[ReadableSpan], root: ReadableSpan) -> str:
    children: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.parent is not None:
            children.setdefault(span.parent.span_id, []).append(span)
    lines: list[str] = []

    def walk(span: ReadableSpan, depth: int) -> None:
        lines.append("  " * depth + span.name)
        assert span.context is not None
        for child in sorted(
            children.get(span.context.span_id, []), key=lambda s: s.start_time or 0
        ):
            walk(child, depth + 1)

    walk(root, 0)
    return "\n".join(lines) + "\n"


def test_one_lifecycle_is_one_trace(traced: tuple[Ledger, InMemorySpanExporter]) -> None:
    ledger, exporter = traced
    settings = ledger.settings
    admin = {"Authorization": "Bearer " + mint_token(settings, subject="ops", role="admin")}
    proposer = {
        "Authorization": "Bearer "
        + mint_token(settings, subject="assistant-backend", role="proposer")
    }
    channel = {
        "Authorization": "Bearer "
        + mint_token(settings, subject="chat", role="channel", provenance=PROVENANCE)
    }
    capability = "fake.provider_idempotency"
    with TestClient(create_app(settings, ledger=ledger)) as client:
        for path, body in directory_puts():
            assert client.put(DIRECTORY + path, json=body, headers=admin).is_success
        created = client.post(
            f"{API}/proposals",
            headers=proposer,
            json={
                "actor_id": PROVENANCE.actor_id,
                # the clock is the real time (the emulator reaps lookups whose TTL has passed)
                "spec": spec(
                    capability,
                    executor_build=fake_build_digest(capability),
                    expires_at=format_utc(ledger.clock.now() + timedelta(days=1)),
                ),
            },
        )
        assert created.status_code == 201, created.text
        token = client.post(
            f"{API}/proposals/{created.json()['proposal_id']}/presentations",
            headers=proposer,
            json={
                "version": 1,
                "identity_binding_id": PROVENANCE.identity_binding_id,
                "channel_binding_id": PROVENANCE.channel_binding_id,
                "conversation_key": PROVENANCE.conversation_key,
            },
        ).json()["token"]
        feed = work_feed(ledger)  # what the runtime's worker listens to on this store
        exporter.clear()
        approved = client.post(f"{API}/approvals", json={"token": token}, headers=channel)
        assert approved.status_code == 202, approved.text
    attempt_id = approved.json()["attempt_id"]

    stored = ledger.store.get(ExecutionAttempt, attempt_id)
    assert stored is not None and stored.trace_context is not None
    assert set(stored.trace_context) <= {"traceparent", "tracestate"}

    # the notification log (SQLite) or the table's stream (DynamoDB) delivers the attempt
    delivered: list[str] = []
    for _ in range(200):
        delivered += feed.poll(0.05)
        if attempt_id in delivered:
            break
    assert attempt_id in delivered
    # the worker: no ambient context, as in another process; it continues the trace
    assert make_worker(ledger).process(attempt_id, trigger=feed.trigger) is Outcome.SUCCEEDED

    spans = list(exporter.get_finished_spans())
    roots = [s for s in spans if s.parent is None]
    assert [s.name for s in roots] == ["POST /api/conversational/approvals"], [
        s.name for s in roots
    ]
    assert {s.context.trace_id for s in spans if s.context} == {roots[0].context.trace_id}
    drawn = tree(spans, roots[0])
    print(drawn)
    assert drawn == EXPECTED_TREE

    by_name = {s.name: s for s in spans}
    assert by_name["ledger.worker.process"].attributes["ledger.attempt_id"] == attempt_id
    assert by_name["ledger.worker.process"].attributes["ledger.outcome"] == "succeeded"
    assert by_name["ledger.worker.process"].attributes["ledger.trigger"] == feed.trigger
    assert by_name["ledger.executor.call"].attributes["ledger.executor_outcome"] == "ok"
    assert by_name["ledger.executor.call"].attributes["ledger.capability"] == capability
    assert by_name["ledger.worker.lease"].attributes["ledger.lease_generation"] == 1
    assert roots[0].attributes["http.route"] == f"{API}/approvals"
    assert roots[0].attributes["http.response.status_code"] == 202
    # never content, tokens or keys: every attribute value is an id, a count or a state
    everything = repr([dict(s.attributes or {}) for s in spans]) + repr([s.events for s in spans])
    assert token not in everything and "Buy milk" not in everything
    assert stored.idempotency_key not in everything
