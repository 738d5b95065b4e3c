"""DynamoDB fixtures: an endpoint per test session (per xdist worker), a real
boto3 client, and a fresh table per test.

Where the endpoint comes from, first match wins:

- ``LEDGER_TEST_DYNAMODB_ENDPOINT=<url>``: that endpoint (another emulator, or
  real DynamoDB); nothing is started.
- ``LEDGER_TEST_DYNAMODB=container``: the emulator's image in a container, with
  testcontainers (``tests/support/emulator_container.py``); every test that needs
  it is skipped, with the reason, when no Docker engine or image is available.
- otherwise (``LEDGER_TEST_DYNAMODB=subprocess``, the default): a ministack
  process on loopback (``tests/support/ministack.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from adapters.dynamodb.client import make_client
from adapters.dynamodb.layout import NEW_TABLE
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.dynamodb.schema import create_table
from tests.support import emulator_container, ministack

ENDPOINT_ENV = "LEDGER_TEST_DYNAMODB_ENDPOINT"
MODES = ("subprocess", "container")


_SESSIONS: dict[int, Any] = {}


def _session() -> Any:
    """One boto3 session per thread: loading the service model once saves time."""
    import boto3

    key = threading.get_ident()
    if key not in _SESSIONS:
        _SESSIONS[key] = boto3.session.Session()
    return _SESSIONS[key]


def new_client(endpoint_url: str, **config: Any) -> Any:
    """A real boto3 client for the endpoint; dummy credentials unless real ones are set."""
    kwargs: dict[str, Any] = {
        "endpoint_url": endpoint_url,
        "region_name": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    }
    if not os.environ.get("AWS_ACCESS_KEY_ID") or not os.environ.get(ENDPOINT_ENV):
        kwargs.update(aws_access_key_id="testing", aws_secret_access_key="testing")
    if config:
        from adapters.dynamodb.client import client_config

        kwargs["config"] = client_config(**config)
    return make_client(session=_session(), **kwargs)


def new_table_name() -> str:
    return f"ledger-test-{uuid.uuid4().hex[:16]}"


TEST_LAYOUT = dataclasses.replace(NEW_TABLE, due_buckets=16, head_buckets=16)
"""The layout of a test's table: a new table's, with 16 due buckets recorded
instead of 256 and 16 head buckets instead of 512. Every page of due work
queries each due bucket and every digest each head bucket, and on the emulator
hundreds of queries make a recovery tick or a digest several times slower;
tests/integration/test_dynamodb_due_buckets.py runs the 256 due buckets of a new
table, with workers throughout a migration, and the layout tests
(test_dynamodb_layout*.py, test_serve_dynamodb.py) a new table's whole layout."""


@pytest.fixture(scope="session")
def dynamodb_endpoint() -> Iterator[str]:
    """URL of the DynamoDB endpoint for this session (one ministack per worker)."""
    external = os.environ.get(ENDPOINT_ENV)
    if external:
        yield external.rstrip("/")
        return
    mode = os.environ.get(emulator_container.MODE_ENV, "").strip().lower() or "subprocess"
    if mode not in MODES:
        expected = " or ".join(MODES)
        pytest.fail(f"{emulator_container.MODE_ENV}={mode!r}: expected {expected}", pytrace=False)
    if mode == "container":
        try:
            box = emulator_container.start()
        except emulator_container.EngineUnavailable as exc:
            pytest.skip(f"{emulator_container.MODE_ENV}=container: {exc}")
        try:
            yield box.url
        finally:
            box.stop()
        return
    try:
        node = ministack.start()
    except ministack.MinistackError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield node.url
    finally:
        node.stop()


@pytest.fixture(scope="session")
def dynamodb_client(dynamodb_endpoint: str) -> Iterator[Any]:
    """A real boto3 DynamoDB client for the session endpoint (thread-safe)."""
    client = new_client(dynamodb_endpoint)
    yield client
    client.close()


@pytest.fixture
def dynamodb_tables(dynamodb_client: Any) -> Iterator[list[str]]:
    """Names appended here are dropped after the test (tables a test creates itself)."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(Exception):
            dynamodb_client.delete_table(TableName=name)


@pytest.fixture
def dynamodb_table_name(dynamodb_client: Any) -> Iterator[str]:
    """A fresh ledger table, created with ``schema.create_table``, dropped afterwards."""
    name = new_table_name()
    create_table(dynamodb_client, name, layout=TEST_LAYOUT)
    yield name
    with contextlib.suppress(Exception):  # cleanup must not hide the test's result
        dynamodb_client.delete_table(TableName=name)


@pytest.fixture
def dynamodb_recorder(dynamodb_client: Any, dynamodb_table_name: str) -> DynamoDBLedgerRecorder:
    """A ``DynamoDBLedgerRecorder`` on its own fresh table."""
    return DynamoDBLedgerRecorder(table_name=dynamodb_table_name, client=dynamodb_client)


@pytest.fixture
def dynamodb_legacy_recorder(dynamodb_client: Any) -> Iterator[DynamoDBLedgerRecorder]:
    """A recorder on a table made before the layout record (16 head buckets, no
    directory shards): a new table with its layout record deleted."""
    from adapters.dynamodb.layout import LEGACY, layout_key

    name = new_table_name()
    create_table(dynamodb_client, name)
    dynamodb_client.delete_item(TableName=name, Key=layout_key())
    recorder = DynamoDBLedgerRecorder(table_name=name, client=dynamodb_client)
    assert recorder.layout == LEGACY
    yield recorder
    with contextlib.suppress(Exception):
        dynamodb_client.delete_table(TableName=name)
