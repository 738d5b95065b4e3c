"""The crash boundaries (a)-(e) of design.md 10, scenario 5, and
provider faults with the http executor in all
three delivery modes, on SQLite and on the DynamoDB emulator. Each ends with the
provider's own counter: at most one effect per idempotency key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.store import LedgerStore
from domain.services.execution import CrashPoint, SimulatedCrash
from tests.support.provider_fixtures import Provider
from tests.support.worlds.execution import CrashAfterEffect, CrashAt
from tests.support.worlds.http_executor import HttpWorld, http_world

pytestmark = pytest.mark.slow  # subprocess servers and real timeouts

MODES = ["provider_idempotency", "correlation_lookup", "operator_reconciliation_only"]
TIMEOUT = 1.0  # the executor's: every exchange ends by then
# The late answer is sent this long after the provider applied the request, so
# always after the executor's deadline (the request reached the provider after
# the deadline's clock started): the margin is no race.
LATE_ANSWER_DELAY = str(TIMEOUT + 0.3)  # content holds decimals as strings

# (status after recovery, provider effects, provider write requests) per boundary and mode
CRASHES = {
    ("a", "provider_idempotency"): ("succeeded", 1, 1),
    ("a", "correlation_lookup"): ("succeeded", 1, 1),
    ("a", "operator_reconciliation_only"): ("succeeded", 1, 1),
    ("b", "provider_idempotency"): ("succeeded", 1, 1),
    ("b", "correlation_lookup"): ("succeeded", 1, 1),
    ("b", "operator_reconciliation_only"): ("succeeded", 1, 1),
    ("c", "provider_idempotency"): ("succeeded", 1, 1),
    ("c", "correlation_lookup"): ("failed_safe", 0, 0),
    ("c", "operator_reconciliation_only"): ("outcome_unknown", 0, 0),
    ("d", "provider_idempotency"): ("succeeded", 1, 2),
    ("d", "correlation_lookup"): ("succeeded", 1, 1),
    ("d", "operator_reconciliation_only"): ("outcome_unknown", 1, 1),
    ("e", "provider_idempotency"): ("succeeded", 1, 2),
    ("e", "correlation_lookup"): ("succeeded", 1, 1),
    ("e", "operator_reconciliation_only"): ("outcome_unknown", 1, 1),
}

# provider faults on the first request of a key: (status, effects, write requests)
FAULTS = {
    ("reject_4xx", "provider_idempotency"): ("failed_safe", 0, 1),
    ("reject_4xx", "correlation_lookup"): ("failed_safe", 0, 1),
    ("reject_4xx", "operator_reconciliation_only"): ("failed_safe", 0, 1),
    ("error_5xx", "provider_idempotency"): ("succeeded", 1, 2),
    ("error_5xx", "correlation_lookup"): ("failed_safe", 0, 1),
    ("error_5xx", "operator_reconciliation_only"): ("outcome_unknown", 0, 1),
    ("drop_after_effect", "provider_idempotency"): ("succeeded", 1, 2),
    ("drop_after_effect", "correlation_lookup"): ("succeeded", 1, 1),
    ("drop_after_effect", "operator_reconciliation_only"): ("outcome_unknown", 1, 1),
    ("late_answer", "provider_idempotency"): ("succeeded", 1, 2),
    ("late_answer", "correlation_lookup"): ("succeeded", 1, 1),
    ("late_answer", "operator_reconciliation_only"): ("outcome_unknown", 1, 1),
}


@pytest.fixture
def store(engine_store: LedgerStore) -> LedgerStore:
    """The crash matrix runs on real storage engines: SQLite and the DynamoDB emulator."""
    return engine_store


@pytest.fixture
def hworld(store: LedgerStore, provider: Provider, tmp_path: Path) -> Iterator[HttpWorld]:
    world = http_world(store, provider, tmp_path, timeout=TIMEOUT)
    yield world
    assert world.loaded is not None
    world.loaded.registry.close()


def settle(world: HttpWorld) -> None:
    for _ in range(3):  # more ticks change nothing: outcome_unknown is never requeued
        world.recover_after_lease()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("boundary", ["a", "b", "c", "d", "e"])
def test_crash_boundaries_with_the_http_executor(
    hworld: HttpWorld, boundary: str, mode: str
) -> None:
    attempt_id = hworld.approved(mode)
    if boundary == "d":
        hworld.swap(mode, CrashAfterEffect)
    if boundary != "a":
        point = {
            "b": CrashPoint.AFTER_LEASE,
            "c": CrashPoint.AFTER_DISPATCH_MARKER,
            "e": CrashPoint.AFTER_RESPONSE,
        }.get(boundary)
        with pytest.raises(SimulatedCrash):
            hworld.worker(CrashAt(point) if point else None).process(attempt_id)
    settle(hworld)

    status, effects, requests = CRASHES[(boundary, mode)]
    attempt = hworld.attempt(attempt_id)
    assert (
        attempt.status.value,
        hworld.effects_of(attempt_id),
        hworld.requests_of(attempt_id),
    ) == (status, effects, requests)
    assert max(hworld.provider.effects().values(), default=0) <= 1  # type: ignore[union-attr]
    if status == "succeeded":
        assert attempt.result is not None
        assert set(attempt.result["receipt"]) == {"id", "status"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fault", ["reject_4xx", "error_5xx", "drop_after_effect", "late_answer"])
def test_provider_faults_follow_the_delivery_mode(hworld: HttpWorld, fault: str, mode: str) -> None:
    attempt_id = hworld.approved(mode, fault=fault, delay=LATE_ANSWER_DELAY)
    hworld.worker().process(attempt_id)
    # A late answer is still being sent: a retry now would get 409 (ambiguous, retried later).
    hworld.provider.wait_idle(hworld.attempt(attempt_id).idempotency_key)  # type: ignore[union-attr]
    settle(hworld)

    status, effects, requests = FAULTS[(fault, mode)]
    attempt = hworld.attempt(attempt_id)
    assert (
        attempt.status.value,
        hworld.effects_of(attempt_id),
        hworld.requests_of(attempt_id),
    ) == (status, effects, requests)
    assert max(hworld.provider.effects().values(), default=0) <= 1  # type: ignore[union-attr]
    if fault == "reject_4xx":
        assert attempt.result is not None
        assert attempt.result["reason_code"] == "provider_rejected_400"


# After an earlier dispatch landed (the provider applied the effect and dropped the
# connection), the provider refuses every later write with the key with this status:
# (status, reason, effects, write requests) per refusal and mode, with a budget of
# three dispatches. Never failed_safe: a refusal speaks for that request alone.
REFUSED_RESEND = {
    (401, "provider_idempotency"): ("outcome_unknown", "dispatch_limit", 1, 3),
    (422, "provider_idempotency"): ("outcome_unknown", "resend_key_reused", 1, 2),
    (400, "provider_idempotency"): ("outcome_unknown", "dispatch_limit", 1, 3),
    **{
        (status, "correlation_lookup"): ("succeeded", None, 1, 1)  # looked up, no re-send
        for status in (401, 422, 400)
    },
    **{
        (status, "operator_reconciliation_only"): (
            "outcome_unknown",
            "executor_outcome_uncertain",
            1,
            1,
        )
        for status in (401, 422, 400)
    },
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("refusal", [401, 422, 400])
def test_a_refused_re_send_after_a_landed_dispatch_is_never_failed_safe(
    hworld: HttpWorld, refusal: int, mode: str
) -> None:
    attempt_id = hworld.approved(mode, fault="drop_then_reject", reject_status=refusal)
    worker = hworld.worker(max_dispatches=3)
    worker.process(attempt_id)
    for _ in range(5):
        hworld.recover_after_lease(worker)

    status, reason, effects, requests = REFUSED_RESEND[(refusal, mode)]
    attempt = hworld.attempt(attempt_id)
    assert attempt.result is not None
    assert (
        attempt.status.value,
        attempt.result.get("reason_code"),
        hworld.effects_of(attempt_id),
        hworld.requests_of(attempt_id),
    ) == (status, reason, effects, requests)
    assert max(hworld.provider.effects().values(), default=0) <= 1  # type: ignore[union-attr]
