"""Issue 19 (memory): the fakes' file-backed effect ledger holds one connection.

The worker calls every executor on a fresh thread (``ThreadedCalls``). With a
connection per thread, each call opened a connection of its own (its own page
cache, two PRAGMAs) that lived until the thread's locals were collected: a
long-running ``ledger serve`` grew with the churn. One connection per process,
behind a lock, serves every thread; a forked child opens its own.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.executors.fake import CACHE_KIB, FakeExecutor, FileEffectLedger
from domain.ports import ExecutionRequest
from domain.services.deadline import ThreadedCalls
from domain.spec import parse_spec
from tests.support.clocks import FixedClock
from tests.support.worlds.approval import DIGEST

CALLS = 60


def _request(clock: FixedClock, key: str) -> ExecutionRequest:
    spec = parse_spec(
        {
            "capability": "fake.provider_idempotency",
            "executor_build": DIGEST,
            "plugin_build": DIGEST,
            "schema_digest": DIGEST,
            "policy_digest": DIGEST,
            "permission": "tasks.write",
            "effect": "create",
            "destination": "tasks",
            "content": {"simulate": "success"},
            "sources": ["m:1"],
            "expires_at": "2999-01-01T00:00:00Z",
        }
    )
    return ExecutionRequest(
        spec=spec,
        attempt_id="att_x",
        idempotency_key=key,
        deadline=clock.now() + timedelta(seconds=58),
    )


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of every SQLite connection opened while the test runs."""
    opened: list[str] = []
    real = sqlite3.connect

    def counting(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(database))
        return real(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counting)
    return opened


def test_executor_calls_on_fresh_threads_share_one_connection(
    tmp_path: Path,
    connects: list[str],
) -> None:
    path = str(tmp_path / "fx.db")
    ledger = FileEffectLedger(path)
    executor = FakeExecutor("fake.provider_idempotency", ledger)
    calls, clock = ThreadedCalls(), FixedClock()

    for n in range(CALLS):  # each call runs on a thread of its own, as the worker's do
        request = _request(clock, f"idk_{n % 20:020d}")
        calls.run(lambda r=request: executor.execute(r), 30, lambda *_: None)

    assert connects.count(path) == 1  # was one per call
    assert ledger.call_count() == CALLS
    assert ledger.max_effects_per_key() == 1 and len(ledger.effects) == 20
    ledger.close()


def test_many_threads_at_once_apply_each_key_once(tmp_path: Path) -> None:
    ledger = FileEffectLedger(tmp_path / "fx.db")
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def hammer(n: int) -> None:
        try:
            start.wait(30)
            for i in range(25):
                ledger.record_call("fake.provider_idempotency", f"k{i}")
                ledger.apply(f"k{i}", {"by": n}, once=True)
                assert ledger.first(f"k{i}") is not None
        except BaseException as exc:  # reported below, not lost on the thread
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert ledger.call_count() == 200
    assert ledger.max_effects_per_key() == 1 and len(ledger.effects) == 25


def test_its_page_cache_is_small_whatever_the_file_grows_to(tmp_path: Path) -> None:
    ledger = FileEffectLedger(tmp_path / "fx.db")
    with ledger._db() as db:
        assert db.execute("PRAGMA cache_size").fetchone()[0] == -CACHE_KIB
    assert CACHE_KIB <= 512  # SQLite's default is 2 MiB per connection


def _apply_in_child(ledger: FileEffectLedger, key: str) -> None:
    ledger.apply(key, {"provider_id": "child"}, once=True)
    ledger.record_call("fake.provider_idempotency", key)


def test_a_forked_child_opens_its_own_connection_even_while_a_thread_holds_the_lock(
    tmp_path: Path,
) -> None:
    ledger = FileEffectLedger(tmp_path / "fx.db")
    ledger.apply("idk_parent", {"provider_id": "parent"})
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with ledger._db():
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(30)
    try:
        child = multiprocessing.get_context("fork").Process(
            target=_apply_in_child, args=(ledger, "idk_child")
        )
        child.start()
        child.join(60)  # a child stuck on the parent's lock would never exit
        if child.exitcode is None:
            child.kill()
            child.join(10)
        assert child.exitcode == 0
    finally:
        release.set()
        holder.join(30)
    # The parent's own connection still works and sees the child's commit.
    assert ledger.first("idk_child") == {"provider_id": "child"}
    assert ledger.effect_count("idk_parent") == 1 and ledger.call_count() == 1
