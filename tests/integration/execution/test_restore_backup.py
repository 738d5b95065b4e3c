"""Issue 25.6: restoring a backup never repeats an effect (I17).

The scenario of the issue: 21 attempts (7 in each delivery mode) approved, the
store backed up while they are queued, every attempt dispatched and
succeeded, an audit digest taken, the backup restored. The restored store
shows them queued again. Without the restore's handling (the code before),
recovery dispatched them again: a second effect for every correlation_lookup
and operator-only attempt (the fake provider deduplicates only
provider_idempotency keys). With it, nothing restored is dispatched blindly:
0 second effects, every operator-only attempt ``outcome_unknown``, and the
digest check names every stream the restore lost.

SQLite restores through its backup API (``adapters.sqlite.backup``). On the
emulator the table is restored with ``RestoreTableToPointInTime``; ministack
copies the table's items as they are at the call rather than at the point in
time asked for, so the call is made at the moment of the backup, and what the
ledger does with the restored table is what is tested.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.audit.digests import take_digest, verify_ledger
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.settings import load_settings
from adapters.sqlite.backup import backup_store, restore_store
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from domain.restore import RestoreSource
from domain.services.execution import Worker, WorkerPolicy
from domain.services.recovery import run_recovery
from domain.services.restore import RESTORED, record_restore, settle_restore
from tests.support.worlds.execution import LEASE, MODES, ExecutionWorld

PER_MODE = 7


class Backups:
    """One store, backed up and restored the way its engine does it."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.request = request
        self.path = str(tmp_path / "ledger.db")
        self.opened: list[Any] = []
        self.table = ""

    def open(self) -> LedgerStore:
        if self.kind == "sqlite":
            recorder: Any = SQLiteLedgerRecorder(open_datastore(self.path))
            recorder.create_table()
        else:
            self.table = self.request.getfixturevalue("dynamodb_table_name")
            client = self.request.getfixturevalue("dynamodb_client")
            recorder = DynamoDBLedgerRecorder(table_name=self.table, client=client)
        self.opened.append(recorder)
        return LedgerStore(recorder)

    def back_up(self) -> None:
        if self.kind == "sqlite":
            backup_store(self.path, str(self.tmp_path / "backup.db"))
            return
        client = self.request.getfixturevalue("dynamodb_client")
        self.restored_table = f"{self.table}-restored-{uuid.uuid4().hex[:6]}"
        # ministack copies the items at the call: the call is the point in time
        client.restore_table_to_point_in_time(
            SourceTableName=self.table,
            TargetTableName=self.restored_table,
            UseLatestRestorableTime=True,
        )
        self.request.getfixturevalue("dynamodb_tables").append(self.restored_table)

    def restore(self) -> LedgerStore:
        if self.kind == "sqlite":
            for recorder in self.opened:
                recorder.close()
            restore_store(str(self.tmp_path / "backup.db"), self.path)
            recorder: Any = SQLiteLedgerRecorder(open_datastore(self.path))
            self.opened.append(recorder)
            return LedgerStore(recorder)
        client = self.request.getfixturevalue("dynamodb_client")
        return LedgerStore(DynamoDBLedgerRecorder(table_name=self.restored_table, client=client))

    def close(self) -> None:
        if self.kind == "sqlite":
            for recorder in self.opened:
                recorder.close()


@pytest.fixture(params=["sqlite", pytest.param("dynamodb", marks=pytest.mark.dynamodb)])
def backups(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backups]:
    found = Backups(request.param, tmp_path, request)
    yield found
    found.close()


def run_after_restore(
    xworld: ExecutionWorld, restored: LedgerStore, *, handle: bool
) -> tuple[Any, Worker]:
    ctx = dataclasses.replace(xworld.ctx, store=restored)
    worker = Worker(ctx, WorkerPolicy(lease_seconds=LEASE))
    report = None
    if handle:
        restore_id = record_restore(ctx, source=RestoreSource.COMMAND)
        report = settle_restore(ctx, worker.policy, restore_id)
    for _ in range(6):  # the restarted ledger's recovery, past every settle window
        xworld.clock.advance(LEASE + 60)
        run_recovery(worker)
    return report, worker


def scenario(backups: Backups, *, handle: bool) -> dict[str, Any]:
    store = backups.open()
    registry_world = ExecutionWorld(store)
    from adapters.executors.fake import EffectLedger, register_fakes
    from adapters.executors.registry import StaticExecutorRegistry

    registry = StaticExecutorRegistry()
    effects: EffectLedger = register_fakes(registry)
    xworld = ExecutionWorld(store, registry=registry, effects=effects, clock=registry_world.clock)
    attempts = {mode: [xworld.approved(mode) for _ in range(PER_MODE)] for mode in MODES}
    backups.back_up()  # while all 21 are queued
    worker = xworld.worker()
    for ids in attempts.values():
        for attempt_id in ids:
            assert worker.process(attempt_id).value == "succeeded"
    settings = load_settings(store="memory")
    digest = take_digest(settings, store, xworld.clock)  # the last checkpoint

    restored = backups.restore()
    report, after = run_after_restore(xworld, restored, handle=handle)
    rows = {
        mode: [after.ctx.store.get(type(xworld.attempt(ids[0])), a) for a in ids]
        for mode, ids in attempts.items()
    }
    return {
        "effects": {
            mode: [effects.effect_count(a.idempotency_key) for a in found]
            for mode, found in rows.items()
        },
        "calls": {
            mode: [sum(1 for _, k in effects.calls if k == a.idempotency_key) for a in found]
            for mode, found in rows.items()
        },
        "statuses": {mode: [a.status.value for a in found] for mode, found in rows.items()},
        "reasons": {
            mode: [(a.result or {}).get("reason_code") for a in found]
            for mode, found in rows.items()
        },
        "verdict": verify_ledger(restored, digest),
        "attempts": attempts,
        "report": report,
    }


def test_a_restored_backup_repeats_no_effect(backups: Backups) -> None:
    found = scenario(backups, handle=True)

    # 0 second effects at the provider, in every mode
    assert all(n == 1 for counts in found["effects"].values() for n in counts), found["effects"]
    # no blind dispatch: lookup and operator-only attempts were never called again
    assert found["calls"]["correlation_lookup"] == [1] * PER_MODE
    assert found["calls"]["operator_reconciliation_only"] == [1] * PER_MODE
    # the provider-idempotent ones were retried with their key (deduplicated)
    assert found["calls"]["provider_idempotency"] == [2] * PER_MODE
    assert found["statuses"]["provider_idempotency"] == ["succeeded"] * PER_MODE
    assert found["statuses"]["correlation_lookup"] == ["succeeded"] * PER_MODE  # looked up
    assert found["statuses"]["operator_reconciliation_only"] == ["outcome_unknown"] * PER_MODE
    assert found["reasons"]["operator_reconciliation_only"] == [RESTORED] * PER_MODE
    assert found["report"].total == 3 * PER_MODE

    # the audit check names what the restore lost: every attempt stream, cut short
    behind = found["verdict"].behind
    assert not found["verdict"].ok and behind is not None
    lost = {stream for stream, _, _ in behind.truncated}
    assert lost == {a for ids in found["attempts"].values() for a in ids}
    assert behind.missing == ()
    assert all(then > now for _, then, now in behind.truncated)


def test_without_the_restore_handling_effects_repeat(backups: Backups) -> None:
    """The rule before (a restored store trusted as it is): every correlation_lookup
    and operator-only attempt dispatched a second time."""
    found = scenario(backups, handle=False)
    assert found["effects"]["provider_idempotency"] == [1] * PER_MODE
    assert found["effects"]["correlation_lookup"] == [2] * PER_MODE
    assert found["effects"]["operator_reconciliation_only"] == [2] * PER_MODE
