"""Issue 14.8: the fakes behave like what they stand for.

``slow`` takes the time it names on the injected clock (never in real time),
and the effect ledger can live in a file that several processes share, so a
multi-process crash test counts every process's effects.
"""

from __future__ import annotations

import multiprocessing
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.bootstrap import build_ledger
from adapters.executors.fake import (
    MAX_RECORDS,
    EffectLedger,
    FakeExecutor,
    FileEffectLedger,
    effect_ledger,
)
from adapters.settings import Settings
from api.testing import open_test_ledger
from domain.errors import ExecutorOutcomeUncertain
from domain.ports import ExecutionRequest
from domain.services.execution import Outcome
from domain.spec import parse_spec
from tests.support.clocks import FixedClock
from tests.support.worlds.approval import DIGEST


def request(
    clock: FixedClock, simulate: str, key: str = "idk_0123456789abcdef0123", **content: object
) -> ExecutionRequest:
    spec = parse_spec(
        {
            "capability": "fake.correlation_lookup",
            "executor_build": DIGEST,
            "plugin_build": DIGEST,
            "schema_digest": DIGEST,
            "policy_digest": DIGEST,
            "permission": "tasks.write",
            "effect": "create",
            "destination": "tasks",
            "content": {"simulate": simulate, **content},
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


def test_slow_takes_the_time_it_names_on_the_injected_clock() -> None:
    clock = FixedClock()
    start = clock.now()
    ledger = EffectLedger()
    executor = FakeExecutor("fake.correlation_lookup", ledger, clock)

    executor.execute(request(clock, "slow", slow_seconds=90))

    assert clock.now() - start == timedelta(seconds=90)  # the clock moved; nobody slept
    assert ledger.effect_count("idk_0123456789abcdef0123") == 1


def test_slow_without_a_named_time_runs_past_the_deadline() -> None:
    clock = FixedClock()
    asked = request(clock, "slow")
    FakeExecutor("fake.correlation_lookup", EffectLedger(), clock).execute(asked)
    assert clock.now() == asked.deadline + timedelta(seconds=1)


def test_slow_on_a_clock_that_cannot_move_reports_a_timeout() -> None:
    class WallClock:
        def now(self):  # type: ignore[no-untyped-def]
            return FixedClock().now()

    ledger = EffectLedger()
    with pytest.raises(ExecutorOutcomeUncertain):
        FakeExecutor("fake.correlation_lookup", ledger, WallClock()).execute(
            request(FixedClock(), "slow")
        )
    assert ledger.effect_count("idk_0123456789abcdef0123") == 1


def test_a_slow_answer_after_the_deadline_inside_the_lease_is_recorded() -> None:
    """The worker's call takes past its deadline on the injected clock (no real
    time): the answer is still recorded while the lease holds."""
    with open_test_ledger() as ledger:  # its fakes take time on its clock
        spec = ledger.fake_spec("fake.correlation_lookup", simulate="slow")
        attempt_id = ledger.approved(ledger.add_approver(), spec)
        started = ledger.clock.now()
        # slow by default ends one second past the deadline: still inside the lease
        assert ledger.process(attempt_id) is Outcome.SUCCEEDED
        assert ledger.status(attempt_id).status == "succeeded"
        assert ledger.clock.now() > started


def _apply_many(path: str, key: str, count: int) -> None:
    ledger = FileEffectLedger(path)
    for i in range(count):
        ledger.record_call("fake.provider_idempotency", f"{key}-{i}")
        ledger.apply(key, {"provider_id": f"p{i}"}, once=True)
        ledger.apply(f"{key}-{i}", {"provider_id": f"p{i}"})


def test_the_file_ledger_counts_effects_of_several_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "effects.db")
    FileEffectLedger(path)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_apply_many, args=(path, f"idk_{n}", 20)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    shared = FileEffectLedger(path)
    assert shared.call_count() == 80
    for n in range(4):
        assert shared.effect_count(f"idk_{n}") == 1  # check-and-apply is atomic
    assert shared.max_effects_per_key() == 1
    assert len(shared.effects) == 84
    assert shared.first("idk_0") == {"provider_id": "p0"}


def test_two_ledgers_built_on_the_same_file_see_each_others_effects(tmp_path: Path) -> None:
    settings = Settings(store="memory", fake_effects_file=str(tmp_path / "fx.db"))
    first, second = build_ledger(settings), build_ledger(settings)
    assert isinstance(first.effects, FileEffectLedger)
    assert first.effects is not None and second.effects is not None
    first.effects.apply("idk_shared", {"provider_id": "p"})
    assert second.effects.effect_count("idk_shared") == 1
    assert isinstance(effect_ledger(None), EffectLedger)


def test_the_memory_ledger_is_bounded_and_counts_stay_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert MAX_RECORDS == 100_000
    monkeypatch.setattr("adapters.executors.fake.MAX_RECORDS", 50)
    ledger = EffectLedger()
    for i in range(55):
        ledger.record_call("fake.operator_only", f"k{i}")
        ledger.apply(f"k{i}", {"n": i})
    assert len(ledger.calls) == 50 and ledger.call_count() == 55
    assert len(ledger.effects) == 50
    assert ledger.first("k0") is None and ledger.effect_count("k54") == 1


def test_a_ledger_in_an_sqlite_file_keeps_the_fakes_effects_beside_it(tmp_path: Path) -> None:
    # In memory the fake provider grew with every execution of a long-running
    # server; beside the ledger file it stays on disk and outlives a restart.
    db = tmp_path / "data" / "ledger.db"
    settings = Settings(store="sqlite", sqlite_path=str(db))
    first = build_ledger(settings)
    assert isinstance(first.effects, FileEffectLedger)
    assert first.effects.path == str(db) + ".fake-effects"
    first.effects.apply("idk_kept", {"provider_id": "p"}, once=True)
    first.close()

    restarted = build_ledger(settings)
    assert restarted.effects is not None
    assert restarted.effects.apply("idk_kept", {"provider_id": "q"}, once=True) == {
        "provider_id": "p"
    }  # still applied once: the provider remembers
    assert restarted.effects.effect_count("idk_kept") == 1
    restarted.close()
    in_memory = build_ledger(Settings(store="sqlite", sqlite_path=":memory:"))
    assert isinstance(in_memory.effects, EffectLedger)
    in_memory.close()
