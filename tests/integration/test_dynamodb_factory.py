"""``PERSISTENCE_MODULE=adapters.dynamodb`` and the ledger's own settings."""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import (
    AggregateRecorder,
    InfrastructureFactory,
    InfrastructureFactoryError,
)

from adapters.bootstrap import build_ledger, build_recorder
from adapters.dynamodb import Factory
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.schema import describe
from adapters.settings import load_settings
from domain.ports import Commit, DueWork
from tests.support.dynamodb_events import at
from tests.support.dynamodb_fixtures import new_table_name

pytestmark = pytest.mark.dynamodb


@pytest.fixture
def boto_env(monkeypatch: pytest.MonkeyPatch, dynamodb_endpoint: str) -> str:
    """Only boto3's own configuration names the endpoint."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return dynamodb_endpoint


class Counter(Aggregate):
    """A stock eventsourcing aggregate (UUID id)."""

    def __init__(self) -> None:
        self.count = 0

    @event("Incremented")
    def increment(self) -> None:
        self.count += 1


class CounterApp(Application[Any]):
    """An application on aggregate recorders only (no notification log)."""

    def construct_recorder(self) -> Any:
        return self.factory.aggregate_recorder()


def test_persistence_module_serves_an_eventsourcing_application(
    boto_env: str, dynamodb_client: Any, dynamodb_tables: list[str]
) -> None:
    table = new_table_name()
    dynamodb_tables.append(table)
    app = CounterApp(
        env={
            "PERSISTENCE_MODULE": "adapters.dynamodb",
            "DYNAMODB_TABLE": table,
            "IS_SNAPSHOTTING_ENABLED": "y",
        }
    )
    assert isinstance(app.factory, Factory)
    counter = Counter()
    for _ in range(3):
        counter.increment()
    app.save(counter)
    app.take_snapshot(counter.id)
    counter.increment()
    app.save(counter)
    loaded: Counter = app.repository.get(counter.id)
    assert (loaded.count, loaded.version) == (4, 5)
    assert app.repository.get(counter.id, version=2).count == 1
    snapshots = app.snapshots.recorder.select_events(counter.id) if app.snapshots else []
    assert [s.originator_version for s in snapshots] == [4]
    assert describe(dynamodb_client, table)["status"] == "ACTIVE"
    app.close()


def test_factory_offers_aggregate_recorders_only(boto_env: str, dynamodb_tables: list[str]) -> None:
    dynamodb_tables.append(new_table_name())
    factory = InfrastructureFactory.construct(
        {"PERSISTENCE_MODULE": "adapters.dynamodb", "DYNAMODB_TABLE": dynamodb_tables[0]}
    )
    assert isinstance(factory, Factory)
    assert isinstance(factory.aggregate_recorder(), AggregateRecorder)
    for make in (factory.application_recorder, factory.tracking_recorder, factory.process_recorder):
        with pytest.raises(InfrastructureFactoryError, match="hot key"):
            make()
    factory.close()


def test_factory_needs_a_table_name() -> None:
    factory = Factory({})
    with pytest.raises(InfrastructureFactoryError, match="DYNAMODB_TABLE"):
        factory.aggregate_recorder()


def test_ledger_settings_select_dynamodb(
    boto_env: str, dynamodb_client: Any, dynamodb_table_name: str
) -> None:
    settings = load_settings(
        store="dynamodb", dynamodb_table=dynamodb_table_name, due_work_buckets=4
    )
    injected = build_recorder(settings, dynamodb_client=dynamodb_client)
    assert isinstance(injected, DynamoDBLedgerRecorder)
    assert injected.client is dynamodb_client and injected.due_buckets == 4
    ledger = build_ledger(settings)  # its own client, from AWS_ENDPOINT_URL_DYNAMODB
    assert ledger.ready()
    ledger.store.commit(Commit(due=[DueWork("att-1", at(0))]))
    assert injected.select_due(at(0), 10)[0] == [DueWork("att-1", at(0))]
    ledger.close()
