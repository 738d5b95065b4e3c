"""The find index on every store: filters, time ranges and id prefixes are range
reads of one list, newest first, paged; an acknowledged failed_safe leaves the
attention list."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from adapters.store import LedgerStore
from api.service import find
from api.service.principal import Principal, Role
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.errors import Forbidden, InvalidInput
from domain.ports import Commit
from domain.spec import format_utc
from projections.ports import ViewStore
from projections.projector import Projector
from tests.support.factories import T0

ADMIN = Principal(subject="ops", role=Role.ADMIN)


def queued(n: int, capability: str, actor: str) -> ExecutionAttempt:
    return ExecutionAttempt(
        attempt_id=f"att_{n:04d}",
        proposal_id=f"prop_{n % 4:04d}",
        proposal_version=1,
        payload_hash="sha256:" + "1" * 64,
        view_hash="sha256:" + "2" * 64,
        idempotency_key=f"idk_{n}",
        capability=capability,
        executor_build="sha256:" + "3" * 64,
        delivery_mode="provider_idempotency",
        actor_id=actor,
        identity_binding_id="ib",
        channel_binding_id="cb",
        conversation_key="conv",
        permission="tasks.write",
        target_id="task:42",
        target_revision="r7",
        at=format_utc(T0 + timedelta(minutes=n)),
        spec={"destination": "tasks", "effect": "create", "content": {"title": "x"}},
    )


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["attempt_id"] for row in rows]


def test_search_reads_one_list_newest_first_paged(store: LedgerStore, views: ViewStore) -> None:
    projector = Projector(store, views)  # type: ignore[arg-type]
    for n in range(12):
        attempt = queued(n, ("fake.a", "fake.b")[n % 2], ("alice", "bob", "carol")[n % 3])
        if n in (3, 4):
            attempt.lease(owner="w", now=T0 + timedelta(minutes=20), lease_seconds=60)
            attempt.fail_safe(
                reason_code="no_write", now=T0 + timedelta(minutes=20, seconds=30), generation=1
            )
        store.commit(Commit(aggregates=[attempt]))
        assert projector.project_attempt(attempt.id) is True
    ledger: Any = SimpleNamespace(views=views)

    def search(limit: int = 20, cursor: str | None = None, **query: Any) -> Any:
        return find.search(ledger, ADMIN, find.Query(**query), limit, cursor)

    everything, _ = search()
    assert ids(everything) == [f"att_{n:04d}" for n in reversed(range(12))]
    page, cursor = search(limit=5, capability="fake.a")
    rest, end = search(limit=5, cursor=cursor, capability="fake.a")
    assert ids(page + rest) == [f"att_{n:04d}" for n in (10, 8, 6, 4, 2, 0)] and end is None
    both, _ = search(capability="fake.a", actor_id="alice")
    assert ids(both) == ["att_0006", "att_0000"]
    failed, _ = search(status=AttemptStatus.FAILED_SAFE)
    assert ids(failed) == ["att_0004", "att_0003"]
    window, _ = search(since=T0 + timedelta(minutes=2), until=T0 + timedelta(minutes=5))
    assert ids(window) == ["att_0005", "att_0004", "att_0003", "att_0002"]
    by_id, _ = search(id_prefix="att_001")
    assert ids(by_id) == ["att_0010", "att_0011"]
    by_proposal, _ = search(id_prefix="prop_0001")
    assert ids(by_proposal) == ["att_0001", "att_0005", "att_0009"]
    # with an id prefix every other filter given still holds
    assert ids(search(id_prefix="att_001", capability="fake.a")[0]) == ["att_0010"]
    assert ids(search(id_prefix="prop_0000", status=AttemptStatus.FAILED_SAFE)[0]) == ["att_0004"]
    assert ids(search(id_prefix="att_001", since=T0 + timedelta(minutes=11))[0]) == ["att_0011"]
    assert ids(search(id_prefix="att_001", until=T0 + timedelta(minutes=10))[0]) == ["att_0010"]
    assert everything[0]["capability"] == "fake.b" and everything[0]["destination"] == "tasks"
    assert "idempotency_key" not in everything[0] and "content" not in str(everything[0])

    listed, _ = find.attention(ledger, ADMIN, "failed_safe", 20, None)
    assert ids(listed) == ["att_0003", "att_0004"]  # oldest change first
    attempt = store.get(ExecutionAttempt, "att_0003")
    assert attempt is not None
    attempt.acknowledge(acknowledged_by="ops", note="told them", now=T0 + timedelta(hours=1))
    store.commit(Commit(aggregates=[attempt]))
    projector.project_attempt("att_0003")
    assert ids(find.attention(ledger, ADMIN, "failed_safe", 20, None)[0]) == ["att_0004"]
    assert ids(search(status=AttemptStatus.FAILED_SAFE)[0]) == ["att_0004", "att_0003"]

    with pytest.raises(InvalidInput):
        search(id_prefix="att_")  # too short to be a lookup
    with pytest.raises(InvalidInput):
        search(since=T0 + timedelta(days=1), until=T0)
    with pytest.raises(Forbidden):
        find.search(ledger, Principal(subject="alice", role=Role.ACTOR), find.Query(), 5, None)
