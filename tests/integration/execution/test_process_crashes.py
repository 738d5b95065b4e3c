"""Issue 14.8: crash boundary (e) with real process deaths, effects counted across
processes through the shared fake effect ledger (a file).

Each attempt is run by its own worker process, which is killed with SIGKILL
after the provider answered and before the result is written. A separate
recovery process then settles every attempt by delivery mode. The parent reads
the one effect ledger all of them wrote to.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from adapters.bootstrap import build_ledger
from adapters.executors.fake import FileEffectLedger, register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.settings import Settings
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.services.execution import CrashPoint, Worker, WorkerPolicy
from domain.services.recovery import run_recovery
from tests.support.worlds.execution import MODES, ExecutionWorld

# Real time: a short lease, and a deadline one second inside it.
POLICY = WorkerPolicy(lease_seconds=2, deadline_margin_seconds=1)


def _settings(db: str, effects: str) -> Settings:
    return Settings(store="sqlite", sqlite_path=db, fake_effects_file=effects)


def _die_after_response(db: str, effects: str, attempt_id: str) -> None:
    ledger = build_ledger(_settings(db, effects))

    def hook(point: CrashPoint, _: str) -> None:
        if point is CrashPoint.AFTER_RESPONSE:
            os.kill(os.getpid(), signal.SIGKILL)

    Worker(ledger.context, POLICY, crash_hook=hook).process(attempt_id)


def _recover_until_settled(db: str, effects: str, attempt_ids: list[str]) -> None:
    ledger = build_ledger(_settings(db, effects))
    worker = Worker(ledger.context, POLICY)
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        run_recovery(worker)
        states = [ledger.store.get(ExecutionAttempt, a) for a in attempt_ids]
        if all(s is not None and (s.is_terminal or s.status == "outcome_unknown") for s in states):
            return
        time.sleep(0.2)  # waiting for real leases to expire, not asserting on time
    raise SystemExit(3)


@pytest.mark.slow
def test_workers_killed_after_the_response_never_duplicate_an_effect(tmp_path: Path) -> None:
    db, effects_file = str(tmp_path / "ledger.db"), str(tmp_path / "effects.db")
    recorder = SQLiteLedgerRecorder(open_datastore(db))
    recorder.create_table()
    registry = StaticExecutorRegistry()
    shared = register_fakes(registry, FileEffectLedger(effects_file))
    world = ExecutionWorld(LedgerStore(recorder), registry=registry)
    attempts = {mode: world.approved(mode) for mode in MODES}
    recorder.close()

    context = multiprocessing.get_context("fork")
    for attempt_id in attempts.values():
        victim = context.Process(target=_die_after_response, args=(db, effects_file, attempt_id))
        victim.start()
        victim.join(60)
        assert victim.exitcode == -signal.SIGKILL
    recovery = context.Process(
        target=_recover_until_settled, args=(db, effects_file, list(attempts.values()))
    )
    recovery.start()
    recovery.join(90)
    assert recovery.exitcode == 0

    ledger = build_ledger(_settings(db, effects_file))
    try:
        expected = {
            "provider_idempotency": ("succeeded", 2),
            "correlation_lookup": ("succeeded", 1),
            "operator_reconciliation_only": ("outcome_unknown", 1),
        }
        for mode, attempt_id in attempts.items():
            attempt = ledger.store.get(ExecutionAttempt, attempt_id)
            assert attempt is not None
            key = attempt.idempotency_key
            status, calls = expected[mode]
            assert attempt.status == status, mode
            assert shared.effect_count(key) == 1, mode  # counted across four processes
            assert sum(1 for _, k in shared.calls if k == key) == calls, mode
        assert shared.max_effects_per_key() == 1
    finally:
        ledger.close()
