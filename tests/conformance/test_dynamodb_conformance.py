"""The eventsourcing library's own aggregate recorder test case, on DynamoDB.

Only ``AggregateRecorderTestCase`` applies: the application, tracking and
process cases need a gap-free global notification log, which on DynamoDB is a
single hot key every write would have to touch; the ledger does not offer one
there (projections read DynamoDB Streams). docs/dynamodb.md lists which cases
run on which backend.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from eventsourcing.tests.persistence import AggregateRecorderTestCase

from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.schema import create_table
from tests.support.dynamodb_fixtures import new_table_name

pytestmark = pytest.mark.dynamodb


class _OnDynamoDB(AggregateRecorderTestCase):
    """Binds the session client; every recorder gets its own fresh table."""

    __test__ = False  # a base, not a test case of its own
    client: Any
    tables: list[str]

    @pytest.fixture(autouse=True)
    def _bind_client(self, dynamodb_client: Any, dynamodb_tables: list[str]) -> None:
        self.client = dynamodb_client
        self.tables = dynamodb_tables

    def create_recorder(self) -> DynamoDBLedgerRecorder:
        name = new_table_name()
        self.tables.append(name)
        create_table(self.client, name)
        return DynamoDBLedgerRecorder(table_name=name, client=self.client)

    # test_performance is inherited unchanged: it times 100 inserts and only
    # prints the rate (no assertion), which takes well under a second on the
    # emulator. The comparable numbers live in bench/bench_store.py.


class TestDynamoDBRecorderWithTextIds(_OnDynamoDB):
    """The ledger's own streams are text ids (``actor:alice``, ``att_<hex>``)."""

    __test__ = True

    def new_originator_id(self) -> str:
        return f"stream:{uuid.uuid4().hex}"


class TestDynamoDBRecorderWithUUIDs(_OnDynamoDB):
    """Stock eventsourcing aggregates use UUIDs; they come back as UUIDs."""

    __test__ = True
