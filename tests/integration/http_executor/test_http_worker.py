"""The worker with the http executor: unreadable answers become outcome_unknown with a
bounded reason, and a hung provider never holds the call past the lease's deadline."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.store import LedgerStore
from adapters.system import SystemClock
from domain.services.execution import Worker, WorkerPolicy
from domain.services.recovery import run_recovery
from domain.timeutil import parse_utc
from tests.support.provider_fixtures import Provider
from tests.support.worlds.http_executor import http_world

pytestmark = pytest.mark.slow  # subprocess servers and real timeouts


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("not_json", "response_not_json"),
        ("huge_answer", "response_too_large"),
    ],
)
def test_an_unreadable_success_is_outcome_unknown_and_never_retried(
    provider: Provider, tmp_path: Path, fault: str, reason: str
) -> None:
    world = http_world(LedgerStore(MemoryLedgerRecorder()), provider, tmp_path)
    attempt_id = world.approved("provider_idempotency", fault=fault, size_mb=50)
    assert world.worker().process(attempt_id).value == "outcome_unknown"
    world.recover_after_lease()
    attempt = world.attempt(attempt_id)
    assert attempt.status.value == "outcome_unknown"
    assert attempt.result is not None and attempt.result["reason_code"] == reason
    assert (world.effects_of(attempt_id), world.requests_of(attempt_id)) == (1, 1)


def test_a_hung_provider_never_holds_a_lease_past_its_deadline(
    provider: Provider, tmp_path: Path
) -> None:
    clock = SystemClock()
    world = http_world(
        LedgerStore(MemoryLedgerRecorder()), provider, tmp_path, clock=clock, timeout=60
    )
    attempt_id = world.approved("provider_idempotency", fault="hang", delay=6)
    worker = Worker(world.ctx, WorkerPolicy(lease_seconds=5, deadline_margin_seconds=2))
    outcome = worker.process(attempt_id)
    returned_at = clock.now()
    attempt = world.attempt(attempt_id)
    assert outcome.value == "pending"  # ambiguous: recovery retries with the same key
    assert attempt.lease_expires_at is not None
    assert returned_at < parse_utc(attempt.lease_expires_at)
    assert world.effects_of(attempt_id) == 0
    report = run_recovery(worker)  # the lease has not expired: nothing is retried yet
    assert world.requests_of(attempt_id) == 1, report
