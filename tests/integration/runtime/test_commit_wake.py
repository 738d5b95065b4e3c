"""A commit in the process wakes the embedded work feed at once; a commit made by
another process is still read within the feed's poll interval."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from adapters.backend import NotificationLogFeed
from adapters.bootstrap import build_ledger
from adapters.commit_signal import CommitSignal, commit_signal
from adapters.executors.fake import fake_build_digest
from adapters.runtime import Runtime
from adapters.settings import load_settings
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from api.testing import open_test_ledger
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.services.approval import approve
from tests.support.worlds.execution import ExecutionWorld

STORES = ["memory", "sqlite"]
# Far longer than any test waits: a feed that slept out its interval fails them.
LONG_POLL_SECONDS = 120.0


def test_a_signal_wait_ends_on_a_later_commit_and_not_on_an_earlier_one() -> None:
    signal = CommitSignal()
    seen = signal.count
    assert signal.wait(seen, 0) is False
    signal.notify()
    assert signal.wait(seen, LONG_POLL_SECONDS) is True  # the commit came after `seen`
    assert signal.wait(signal.count, 0.001) is False


def test_a_waiter_is_released_by_a_commit_on_another_thread() -> None:
    signal = CommitSignal()
    seen = signal.count
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(signal.wait(seen, LONG_POLL_SECONDS)))
    waiter.start()
    signal.notify()
    waiter.join(10)
    assert not waiter.is_alive() and woken == [True]


def test_each_recorder_has_one_signal_shared_by_its_store_and_feeds(tmp_path: Path) -> None:
    one = SQLiteLedgerRecorder(open_datastore(str(tmp_path / "a.db")))
    other = SQLiteLedgerRecorder(open_datastore(str(tmp_path / "a.db")))
    assert commit_signal(one) is commit_signal(one)
    assert commit_signal(one) is not commit_signal(other)  # another opener: another process
    one.close()
    other.close()


@pytest.mark.parametrize("store", STORES)
def test_an_approval_ends_the_feeds_wait_at_once(store: str, tmp_path: Path) -> None:
    with open_test_ledger(store=store, sqlite_path=str(tmp_path / "l.db")) as ledger:
        recorder = ledger.wiring.store.recorder
        feed = NotificationLogFeed(recorder)  # type: ignore[arg-type]
        alice = ledger.add_approver()
        found: list[str] = []
        polling = threading.Thread(target=lambda: found.extend(feed.poll(LONG_POLL_SECONDS)))
        polling.start()
        attempt_id = ledger.approved(alice, ledger.fake_spec())
        polling.join(10)
        assert not polling.is_alive(), "the feed slept out its interval after a commit"
        found += feed.poll(0)
        assert found == [attempt_id]


def test_a_commit_by_another_opener_is_read_within_the_poll_interval(tmp_path: Path) -> None:
    path = str(tmp_path / "l.db")
    with open_test_ledger(store="sqlite", sqlite_path=path) as ledger:
        alice = ledger.add_approver()
        spec = ledger.fake_spec()
        # a second opener of the file: its commits never reach this feed's signal
        elsewhere = SQLiteLedgerRecorder(open_datastore(path))
        feed = NotificationLogFeed(elsewhere)
        assert feed.signal is not commit_signal(ledger.wiring.store.recorder)
        attempt_id = ledger.approved(alice, spec)
        found: list[str] = []
        deadline = time.monotonic() + 10
        while attempt_id not in found and time.monotonic() < deadline:
            found += feed.poll(0.02)  # bounded: each poll reads the log again
        assert found == [attempt_id]
        elsewhere.close()


@pytest.mark.parametrize("store", STORES)
def test_the_runtime_runs_an_approval_without_waiting_for_its_poll(
    store: str, tmp_path: Path
) -> None:
    ledger = build_ledger(load_settings(store=store, sqlite_path=str(tmp_path / "l.db")))
    runtime = Runtime(
        ledger,
        ledger.backend.work_feed(),
        recovery_interval=3600,
        recovery=False,
        poll_seconds=LONG_POLL_SECONDS,
    )
    runtime.start()
    try:
        world = ExecutionWorld(ledger.store, registry=ledger.registry, effects=ledger.effects)
        capability = "fake.provider_idempotency"
        proposal_id = world.propose(
            capability=capability, executor_build=fake_build_digest(capability)
        )
        token = world.present(proposal_id).token
        attempt_id = approve(world.ctx, token=token, provenance=world.who).attempt_id
        deadline = time.monotonic() + 10
        status = AttemptStatus.QUEUED
        while status is not AttemptStatus.SUCCEEDED and time.monotonic() < deadline:
            attempt = ledger.store.get(ExecutionAttempt, attempt_id)
            status = attempt.status if attempt else status
            time.sleep(0.01)
        assert status is AttemptStatus.SUCCEEDED
    finally:
        stopping = time.monotonic()
        runtime.stop(grace=10)
        # the stop wakes the feed's wait instead of leaving it to its interval
        assert time.monotonic() - stopping < LONG_POLL_SECONDS / 2
        assert not any(thread.is_alive() for thread in runtime.threads)
        ledger.close()
