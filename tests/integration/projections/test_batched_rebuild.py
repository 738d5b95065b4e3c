"""The batched rebuild on memory, SQLite and DynamoDB: it reads, compares and
writes per batch, and it never replaces a row the live projector wrote
meanwhile, nor a due-work entry a transition wrote meanwhile."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import adapters.rebuild as rebuild_module
from adapters.bootstrap import Ledger, backend_for, build_ledger
from adapters.rebuild import canonical, rebuild
from adapters.settings import load_settings
from adapters.sqlite.recorder import open_datastore
from adapters.sqlite.views import SQLiteViewStore
from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.ports import Commit, DueWork
from projections.ports import ViewRecord
from projections.status import STATUS_VIEW, status_record
from tests.support.worlds.execution import ExecutionWorld


@pytest.fixture
def ledger(store: LedgerStore, pworld: ExecutionWorld) -> Ledger:
    return build_ledger(
        load_settings(store="memory", env="test"),
        backend=backend_for(store.recorder),
        clock=pworld.clock,
    )


class Interleaved:
    """The ledger's view store, running ``before_write`` (once) just before the
    rebuild's batched write: what a live projector does between the rebuild's
    read and its write."""

    def __init__(self, inner: Any, before_write: Callable[[], None]) -> None:
        self.inner = inner
        self.before_write: Callable[[], None] | None = before_write
        self.reads = 0
        self.writes = 0

    def get_views(self, name: str, keys: Sequence[str]) -> Any:
        self.reads += 1
        return self.inner.get_views(name, keys)

    def replace_views(self, records: Sequence[ViewRecord], *, force: bool = False) -> int:
        self.writes += 1
        action, self.before_write = self.before_write, None
        if action is not None:
            action()
        written: int = self.inner.replace_views(records, force=force)
        return written

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if name != "identical_views":
            return found

        def compared_as_stored(records: Sequence[ViewRecord]) -> Any:  # a read too
            self.reads += 1
            return found(records)

        return compared_as_stored


@pytest.mark.parametrize("force", [True, False])
def test_a_rebuild_never_replaces_a_row_the_live_projector_wrote_meanwhile(
    ledger: Ledger, pworld: ExecutionWorld, force: bool
) -> None:
    attempts = [pworld.approved("provider_idempotency") for _ in range(3)]
    raced = attempts[1]

    def live_projector_moves_on() -> None:
        pworld.worker().process(raced)  # queued -> succeeded (version 4)
        assert ledger.projector.project_attempt(raced)

    real = ledger.views
    ledger.views = Interleaved(real, live_projector_moves_on)  # type: ignore[assignment]
    report = rebuild(ledger, "status", force=force)
    # the rebuild folded the raced attempt at version 1 (queued) and found no row
    assert report.total == 3 and sorted(report.changed) == sorted(attempts)
    assert report.written == 2  # the version guard refused the older fold
    row = real.get_view(STATUS_VIEW, raced)
    assert row is not None and row.version == 4 and row.data["status"] == "succeeded"
    ledger.views = real
    assert rebuild(ledger, "status", write=False).changed == []


def test_a_rebuild_keeps_the_due_entry_of_a_transition_committed_meanwhile(
    ledger: Ledger, pworld: ExecutionWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = [pworld.approved("provider_idempotency") for _ in range(3)]
    raced = attempts[0]
    for attempt_id in attempts:  # lose the index: every entry differs from the log
        ledger.store.commit(Commit(due=[DueWork(attempt_id, None)]))
    write_due = rebuild_module._write_due
    armed = [True]

    def worker_moves_on_first(led: Ledger, part: list[Any]) -> int:
        if armed.pop() if armed else False:
            pworld.worker().process(raced)  # succeeded: its own commit drops its entry
        return write_due(led, part)

    monkeypatch.setattr(rebuild_module, "_write_due", worker_moves_on_first)
    report = rebuild(ledger, "due_work")
    assert sorted(report.changed) == sorted(attempts)
    assert report.written == 2
    due = {d.attempt_id for d in ledger.store.due_work(pworld.clock.now(), 100).items}
    assert raced not in due  # the fold's "queued, due now" did not come back
    assert due == set(attempts) - {raced}
    assert rebuild(ledger, "due_work", write=False).changed == []


def test_a_rebuild_reads_and_writes_per_batch_and_matches_each_attempt_folded_alone(
    ledger: Ledger, pworld: ExecutionWorld
) -> None:
    attempts = [pworld.approved("provider_idempotency") for _ in range(5)]
    pworld.worker().process(attempts[0])
    real = ledger.views
    counted = Interleaved(real, lambda: None)
    ledger.views = counted  # type: ignore[assignment]
    report = rebuild(ledger, "status", batch=2)
    assert (counted.reads, counted.writes) == (3, 3)  # 5 attempts, batches of 2
    assert report.total == 5 and report.written == 5
    rows = {a: real.get_view(STATUS_VIEW, a) for a in attempts}
    ledger.views = real
    # each row is the one its attempt, read and folded alone, projects
    for attempt_id in attempts:
        attempt = ledger.store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None
        assert canonical(rows[attempt_id]) == canonical(status_record(attempt))
    assert rows[attempts[0]] is not None and rows[attempts[0]].data["status"] == "succeeded"


def test_a_forged_row_of_the_same_version_is_repaired_only_with_force(
    ledger: Ledger, pworld: ExecutionWorld
) -> None:
    attempt_id = pworld.approved("provider_idempotency")
    ledger.projector.project_attempt(attempt_id)
    assert ledger.views is not None
    good = ledger.views.get_view(STATUS_VIEW, attempt_id)
    assert good is not None
    forged = ViewRecord(
        good.name, good.key, good.version, {"status": "forged"}, good.list_pk, good.list_sk
    )
    ledger.views.put_view(forged, force=True)
    assert rebuild(ledger, "status", force=False).written == 0
    assert ledger.views.get_view(STATUS_VIEW, attempt_id) == forged
    report = rebuild(ledger, "status", force=True)
    assert report.changed == [attempt_id] and report.written == 1
    assert ledger.views.get_view(STATUS_VIEW, attempt_id) == good


@pytest.mark.slow
def test_rows_never_go_back_while_rebuilds_race_live_projectors(
    ledger: Ledger, pworld: ExecutionWorld
) -> None:
    """Workers and projectors in threads, rebuilds (forced) in a loop, and a
    reader that fails on any row it sees at a lower version than before."""
    attempts = [pworld.approved("provider_idempotency") for _ in range(24)]
    assert ledger.views is not None
    views = ledger.views
    seen: dict[str, int] = {}
    regressions: list[tuple[str, int, int]] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def guarded(body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)

        return run

    def work(mine: list[str]) -> None:
        worker = pworld.worker()
        for attempt_id in mine:
            worker.process(attempt_id)
            ledger.projector.project_attempt(attempt_id)

    def rebuild_loop() -> None:
        while not done.is_set():
            rebuild(ledger, "status", force=True, batch=5)

    def read_loop() -> None:
        while not done.is_set():
            for attempt_id, row in views.get_views(STATUS_VIEW, attempts).items():
                if row.version < seen.get(attempt_id, 0):
                    regressions.append((attempt_id, seen[attempt_id], row.version))
                seen[attempt_id] = max(row.version, seen.get(attempt_id, 0))

    workers = [threading.Thread(target=guarded(lambda m=attempts[i::3]: work(m))) for i in range(3)]
    others = [
        threading.Thread(target=guarded(rebuild_loop)),
        threading.Thread(target=guarded(read_loop)),
    ]
    for thread in others + workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=120)
    done.set()
    for thread in others:
        thread.join(timeout=120)
    assert errors == []
    assert regressions == []
    final = views.get_views(STATUS_VIEW, attempts)
    assert all(final[a].version == 4 and final[a].data["status"] == "succeeded" for a in attempts)
    assert rebuild(ledger, "status", write=False).changed == []


class HalfUnprocessed:
    """A real client whose first ``BatchGetItem`` answers only half the keys,
    returning the rest as ``UnprocessedKeys`` (as DynamoDB does under throttling)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.batch_gets = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> Any:
        self.batch_gets += 1
        if self.batch_gets > 1:
            return self.inner.batch_get_item(RequestItems=RequestItems)
        ((table, request),) = RequestItems.items()
        keys = request["Keys"]
        half = len(keys) // 2
        answer = self.inner.batch_get_item(RequestItems={table: {**request, "Keys": keys[:half]}})
        answer["UnprocessedKeys"] = {table: {**request, "Keys": keys[half:]}}
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.dynamodb
def test_dynamodb_batch_reads_ask_again_for_unprocessed_keys(dynamodb_recorder: Any) -> None:
    from adapters.dynamodb.views import DynamoDBViewStore

    pauses: list[float] = []
    client = HalfUnprocessed(dynamodb_recorder.client)
    views = DynamoDBViewStore(client, dynamodb_recorder.table_name, sleep=pauses.append)
    rows = [ViewRecord(STATUS_VIEW, f"att_{n:03d}", 1, {"status": "queued"}) for n in range(6)]
    assert views.replace_views(rows) == 6
    found = views.get_views(STATUS_VIEW, [r.key for r in rows] + ["att_missing"])
    assert sorted(found) == [r.key for r in rows]
    assert client.batch_gets == 2 and len(pauses) == 1
    # the same rows again: every guard refuses (same version), nothing written
    assert views.replace_views(rows) == 0
    assert views.replace_views(rows, force=True) == 6


def test_sqlite_compares_rebuilt_rows_with_its_rows_byte_for_byte_as_stored(
    tmp_path: Path,
) -> None:
    """Equal in Python is not enough (``True == 1``), nor equal once decoded: a
    row is identical only when the store holds exactly what it would write."""
    views = SQLiteViewStore(open_datastore(str(tmp_path / "views.db")))
    row = ViewRecord(
        STATUS_VIEW,
        "att_1",
        2,
        {"status": "queued", "n": 1, "r": {"b": 1, "a": "é"}},
        "status#queued",
        "2026-01-01T00:00:00Z#att_1",
    )
    assert views.replace_views([row]) == 1
    assert views.identical_views([row]) == {"att_1"}
    for other in (
        replace(row, version=3),
        replace(row, list_sk="x"),
        replace(row, list_pk=None),
        replace(row, data={**row.data, "n": True}),
        replace(row, key="att_2"),
    ):
        assert views.identical_views([other]) == set(), other
    with views.datastore.transaction(commit=True) as c:  # the same value, other bytes
        c.execute("UPDATE ledger_views SET data=? WHERE key='att_1'", (json.dumps(dict(row.data)),))
    assert views.get_view(STATUS_VIEW, "att_1") == row
    assert views.identical_views([row]) == set()
    assert views.replace_views([row], force=True) == 1
    assert views.identical_views([row]) == {"att_1"}
