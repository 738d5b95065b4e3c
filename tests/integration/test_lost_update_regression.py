"""Regression: the incident this ledger exists for.

An orchestrator kept a whole execution as one document and saved it with an
unguarded read-modify-write; two concurrent processors of the same execution
silently dropped a step record. Here duplicate processors append step records
to one execution stream through the ledger (conditional append per version,
retry on conflict) and nothing is lost; beside it, the whole-document pattern
on the same table loses steps, which shows the test can see the bug.

A barrier between each processor's read and its write makes every round a
real race instead of relying on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from eventsourcing.domain import event

from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.store import LedgerStore
from domain.base import LedgerAggregate
from domain.errors import ConcurrencyConflict
from domain.ports import Commit
from tests.support.dynamodb_events import new_stream
from tests.support.dynamodb_fixtures import new_client

pytestmark = [pytest.mark.dynamodb, pytest.mark.slow]

STEPS = 25  # rounds per processor


class ExecutionRecord(LedgerAggregate):
    """One execution; each step is its own event in the stream."""

    @staticmethod
    def create_id(execution_id: str) -> str:
        return execution_id

    @event("Started")
    def __init__(self, execution_id: str) -> None:
        self.steps: list[str] = []

    @event("StepRecorded")
    def record_step(self, step: str) -> None:
        self.steps.append(step)


def run_processors(count: int, process: Callable[[int, threading.Barrier], None]) -> None:
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def guarded(number: int) -> None:
        try:
            process(number, barrier)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=guarded, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


@pytest.mark.parametrize("processors", [2, 4])
def test_duplicate_processors_lose_no_step_records_on_the_ledger(
    dynamodb_endpoint: str, dynamodb_table_name: str, processors: int
) -> None:
    execution_id = new_stream("exec")
    clients = [new_client(dynamodb_endpoint) for _ in range(processors)]
    stores = [LedgerStore(DynamoDBLedgerRecorder(dynamodb_table_name, c)) for c in clients]
    stores[0].commit(Commit(aggregates=[ExecutionRecord(execution_id=execution_id)]))
    conflicts = [0] * processors

    def process(number: int, barrier: threading.Barrier) -> None:
        store = stores[number]
        for step in range(STEPS):
            raced = False
            while True:
                record = store.get(ExecutionRecord, execution_id)
                assert record is not None
                if not raced:  # everyone has read the same version before anyone writes
                    barrier.wait(timeout=60)
                    raced = True
                record.record_step(f"processor-{number}/step-{step}")
                try:
                    store.commit(Commit(aggregates=[record]))
                    break
                except ConcurrencyConflict:
                    conflicts[number] += 1

    run_processors(processors, process)
    final = stores[0].get(ExecutionRecord, execution_id)
    assert final is not None
    expected = {f"processor-{n}/step-{s}" for n in range(processors) for s in range(STEPS)}
    assert sorted(final.steps) == sorted(expected)  # zero lost, zero duplicated
    assert stores[0].version_of(execution_id) == 1 + processors * STEPS
    assert sum(conflicts) >= (processors - 1) * STEPS  # every round really raced
    for client in clients:
        client.close()


@pytest.mark.parametrize("processors", [2, 4])
def test_whole_document_read_modify_write_loses_step_records(
    dynamodb_endpoint: str, dynamodb_table_name: str, processors: int
) -> None:
    key = {"pk": {"S": f"document#{new_stream('exec')}"}, "sk": {"N": "0"}}
    clients = [new_client(dynamodb_endpoint) for _ in range(processors)]
    clients[0].put_item(TableName=dynamodb_table_name, Item={**key, "steps": {"L": []}})

    def process(number: int, barrier: threading.Barrier) -> None:
        client: Any = clients[number]
        for step in range(STEPS):
            document = client.get_item(TableName=dynamodb_table_name, Key=key, ConsistentRead=True)[
                "Item"
            ]
            barrier.wait(timeout=60)
            document["steps"]["L"].append({"S": f"processor-{number}/step-{step}"})
            client.put_item(TableName=dynamodb_table_name, Item=document)  # last writer wins

    run_processors(processors, process)
    final = clients[0].get_item(TableName=dynamodb_table_name, Key=key, ConsistentRead=True)
    kept = len(final["Item"]["steps"]["L"])
    lost = processors * STEPS - kept
    # Every round, all processors read the same document before any writes it,
    # so exactly one step per round survives: the bug, reproduced every time.
    assert lost == (processors - 1) * STEPS
    for client in clients:
        client.close()
