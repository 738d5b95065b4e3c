"""Tamper evidence: every edit, deletion, reordering and insertion is detected.

Runs on SQLite and on the DynamoDB emulator, tampering with stored items
directly. The attempt stream is anchored to its status view's recorded head.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from adapters.store import LedgerStore
from projections.audit import audit_attempt
from projections.ports import ViewStore
from projections.projector import Projector
from tests.support.raw_views import Row, event_fields, read_rows, replace_rows
from tests.support.worlds.execution import ExecutionWorld


def edit(rows: list[Row], k: int) -> list[Row]:
    version, topic, state = rows[k]
    data = json.loads(state)
    fields = event_fields(data)
    fields["at"] = "2000-01-01T00:00:00Z" if fields.get("at") != "2000-01-01T00:00:00Z" else "x"
    rows[k] = (version, topic, json.dumps(data).encode())
    return rows


def delete_leaving_gap(rows: list[Row], k: int) -> list[Row]:
    del rows[k]
    return rows


def delete_and_renumber(rows: list[Row], k: int) -> list[Row]:
    del rows[k]
    return [(i + 1, topic, state) for i, (_, topic, state) in enumerate(rows)]


def reorder(rows: list[Row], k: int) -> list[Row]:
    j = k - 1 if k == len(rows) - 1 else k + 1
    (vk, tk, sk), (vj, tj, sj) = rows[k], rows[j]
    rows[k], rows[j] = (vk, tj, sj), (vj, tk, sk)
    return rows


def insert(rows: list[Row], k: int) -> list[Row]:
    rows.insert(k, rows[k])
    return [(i + 1, topic, state) for i, (_, topic, state) in enumerate(rows)]


def append_forged(rows: list[Row], k: int) -> list[Row]:
    _, topic, state = rows[k]
    return [*rows, (len(rows) + 1, topic, state)]


MUTATIONS: dict[str, Callable[[list[Row], int], list[Row]]] = {
    "edit": edit,
    "delete_gap": delete_leaving_gap,
    "delete_renumber": delete_and_renumber,
    "reorder": reorder,
    "insert": insert,
    "append_forged": append_forged,
}


@pytest.fixture
def store(engine_store: LedgerStore) -> LedgerStore:
    """Tampering needs a real storage engine: SQLite and the DynamoDB emulator."""
    return engine_store


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_every_mutation_of_an_attempt_stream_is_detected(
    pworld: ExecutionWorld,
    store: LedgerStore,
    views: ViewStore,
    projector: Projector,
    mutation: str,
    where: str,
) -> None:
    attempt_id = pworld.approved("provider_idempotency")
    pworld.worker().process(attempt_id)
    projector.project_attempt(attempt_id)
    clean = audit_attempt(store, views, attempt_id)
    assert clean["verified"], clean

    rows = read_rows(store, attempt_id)
    assert len(rows) >= 4
    k = {"first": 0, "middle": len(rows) // 2, "last": len(rows) - 1}[where]
    replace_rows(store, attempt_id, MUTATIONS[mutation](list(rows), k))

    tampered = audit_attempt(store, views, attempt_id)
    assert tampered["verified"] is False
    assert tampered["attempt"]["first_bad_version"] is not None
