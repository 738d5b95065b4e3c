"""`ledger backup PATH` and `ledger restore`: what they print, and one clear line for
every mistake (issue 25.6)."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from adapters.bootstrap import build_ledger
from adapters.settings import load_settings
from domain.attempt import ExecutionAttempt
from domain.restore import RESTORE_LOG_ID, RestoreLog
from tests.support.cli import assert_one_line_failure, invoke
from tests.support.worlds.execution import MODES, ExecutionWorld


def approved(db: str, per_mode: int = 1) -> list[str]:
    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=db))
    try:
        world = ExecutionWorld(ledger.store, registry=ledger.registry, effects=ledger.effects)
        return [world.approved(mode) for mode in MODES for _ in range(per_mode)]
    finally:
        ledger.close()


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger.db")
    approved(path)
    return path


def test_a_backup_is_a_ledger_store_of_its_own(db: str, tmp_path: Path) -> None:
    target = tmp_path / "backups" / "one.db"
    target.parent.mkdir()
    made = invoke(["backup", str(target)], LEDGER_SQLITE_PATH=db)
    assert made.exit_code == 0, made.stderr
    assert made.stdout.startswith(f"backup of {db} written to {target}: ")
    assert made.stderr == ""  # a small store: no progress
    assert not (tmp_path / "backups" / "one.db-wal").exists()  # one self-contained file
    copy = sqlite3.connect(target)
    assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert copy.execute("SELECT COUNT(*) FROM stored_events").fetchone()[0] > 0
    copy.close()
    assert [p.name for p in target.parent.iterdir()] == ["one.db"]  # no partial file left


def test_progress_is_shown_when_asked(db: str, tmp_path: Path) -> None:
    made = invoke(["backup", str(tmp_path / "b.db"), "--progress"], LEDGER_SQLITE_PATH=db)
    assert made.exit_code == 0, made.stderr
    lines = made.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("backup: 100% (")


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ("{tmp}/exists.db", "already exists: a backup never overwrites"),
        ("{tmp}/no/such/dir/b.db", "the directory {tmp}/no/such/dir does not exist"),
    ],
)
def test_a_bad_path_is_one_line(db: str, tmp_path: Path, target: str, fragment: str) -> None:
    (tmp_path / "exists.db").write_text("")
    path = target.format(tmp=tmp_path)
    result = invoke(["backup", path], LEDGER_SQLITE_PATH=db)
    assert_one_line_failure(result, fragment.format(tmp=tmp_path))


def test_what_is_not_a_store_is_refused(tmp_path: Path) -> None:
    missing = invoke(["backup", str(tmp_path / "b.db")], LEDGER_SQLITE_PATH=str(tmp_path / "x.db"))
    assert_one_line_failure(missing, "no store at")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    refused = invoke(["backup", str(tmp_path / "b.db")], LEDGER_SQLITE_PATH=str(other))
    assert_one_line_failure(refused, "is not a ledger store")
    restored = invoke(["restore", str(other)], LEDGER_SQLITE_PATH=str(tmp_path / "x.db"))
    assert_one_line_failure(restored, "is not a ledger store")


def test_dynamodb_is_backed_up_by_point_in_time_recovery() -> None:
    result = invoke(["backup", "b.db"], LEDGER_STORE="dynamodb")
    assert_one_line_failure(result, "point-in-time recovery", "docs/backup.md")


@pytest.mark.parametrize("args", [["restore"], ["restore", "b.db", "--mark"]])
def test_restore_needs_a_backup_or_mark(args: list[str]) -> None:
    assert_one_line_failure(invoke(args), "give a backup file to restore, or --mark")


def test_restore_keeps_the_store_it_replaces_and_marks_what_was_unsettled(
    db: str, tmp_path: Path
) -> None:
    backup = str(tmp_path / "b.db")
    assert invoke(["backup", backup], LEDGER_SQLITE_PATH=db).exit_code == 0
    done = invoke(["restore", backup], LEDGER_SQLITE_PATH=db)
    assert done.exit_code == 0, done.stderr
    assert f"restored {backup} to {db}" in done.stdout
    assert f"the store it replaced is kept at {db}.before-restore-" in done.stdout
    assert "3 attempts unsettled at the restored point" in done.stdout
    assert "1 operator_reconciliation_only (outcome_unknown, for an admin)" in done.stdout
    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=db))
    try:
        log = ledger.store.get(RestoreLog, RESTORE_LOG_ID)
        assert log is not None and log.pending is None  # recorded and settled
        assert log.latest is not None and log.latest["source"] == "command"
    finally:
        ledger.close()
    again = invoke(["restore", "--mark"], LEDGER_SQLITE_PATH=db)
    assert again.exit_code == 0, again.stderr
    # a second restore finds the same attempts unsettled (they never ran): marked again
    assert "2 attempts unsettled" in again.stdout


@pytest.mark.dynamodb
def test_mark_after_a_point_in_time_restore_on_dynamodb(
    dynamodb_endpoint: str,
    dynamodb_client: Any,
    dynamodb_table_name: str,
    dynamodb_tables: list[str],
    tmp_path: Path,
) -> None:
    """The DynamoDB procedure's `ledger restore --mark` on a table restored with
    RestoreTableToPointInTime (ministack copies the items as they are at the call)."""
    env = {
        "LEDGER_STORE": "dynamodb",
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    settings = load_settings(store="dynamodb", dynamodb_table=dynamodb_table_name)
    ledger = build_ledger(settings, dynamodb_client=dynamodb_client)
    world = ExecutionWorld(ledger.store, registry=ledger.registry, effects=ledger.effects)
    attempts = [world.approved(mode) for mode in MODES]
    restored = f"{dynamodb_table_name}-r-{uuid.uuid4().hex[:6]}"
    dynamodb_client.restore_table_to_point_in_time(
        SourceTableName=dynamodb_table_name,
        TargetTableName=restored,
        UseLatestRestorableTime=True,
    )
    dynamodb_tables.append(restored)
    done = invoke(["restore", "--mark"], LEDGER_DYNAMODB_TABLE=restored, **env)
    assert done.exit_code == 0, done.stderr
    assert "3 attempts unsettled at the restored point" in done.stdout
    after = build_ledger(
        load_settings(store="dynamodb", dynamodb_table=restored), dynamodb_client=dynamodb_client
    )
    statuses = {
        a.delivery_mode.value: a.status.value
        for a in (after.store.get(ExecutionAttempt, i) for i in attempts)
        if a is not None
    }
    assert statuses == {
        "provider_idempotency": "executing",
        "correlation_lookup": "executing",
        "operator_reconciliation_only": "outcome_unknown",
    }
    # the original table is untouched: its attempts are still queued
    original = {
        a.status.value for a in (ledger.store.get(ExecutionAttempt, i) for i in attempts) if a
    }
    assert original == {"queued"}
