"""Issue 26.1: a refusal of a re-send is no proof of "no effect".

In ``provider_idempotency`` recovery re-sends with the same key after a
dispatch whose answer was lost. A "nothing was written" answer to that re-send
(a 401 after a credential rotation, a 400, a 422 for a key already used) speaks
for that request alone: the earlier dispatch may have landed. Only the first
dispatch's proved no-write fails an attempt safe; a re-send's is ambiguous and
follows the delivery mode, and a reused key is evidence of an earlier effect.
"""

from __future__ import annotations

from typing import Any

import pytest

from domain.errors import ExecutorKeyReused, ExecutorNoEffect
from domain.ports import ExecutionReceipt, ExecutionRequest
from domain.services.execution import Outcome
from tests.support.worlds.execution import MODES, ExecutionWorld

IDEMPOTENT = MODES["provider_idempotency"]


class Refusing:
    """An executor whose provider refuses every request with ``error``."""

    def __init__(self, inner: Any, error: ExecutorNoEffect) -> None:
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode
        self.error = error

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        raise self.error


@pytest.mark.parametrize(
    ("simulate", "status", "reason", "calls"),
    [
        # refused again on every re-send: retried within the dispatch budget (3 here)
        ("resend_rejected", "outcome_unknown", "dispatch_limit", 3),
        # the provider says the key was used: evidence, no further re-send
        ("resend_key_reused", "outcome_unknown", "resend_key_reused", 2),
    ],
)
def test_a_refused_re_send_after_a_landed_dispatch_is_never_failed_safe(
    xworld: ExecutionWorld, simulate: str, status: str, reason: str, calls: int
) -> None:
    attempt_id = xworld.approved("provider_idempotency", simulate)
    worker = xworld.worker(max_dispatches=3)
    assert worker.process(attempt_id) is Outcome.PENDING  # applied, answer lost

    first_resend = xworld.recover_after_lease(worker)
    for _ in range(4):
        xworld.recover_after_lease(worker)

    attempt = xworld.attempt(attempt_id)
    assert (attempt.status.value, attempt.result and attempt.result["reason_code"]) == (
        status,
        reason,
    )
    assert xworld.effects.effect_count(attempt.idempotency_key) == 1
    assert xworld.calls_for(attempt_id) == calls
    assert xworld.topics(attempt_id).count("DispatchStarted") == calls
    if simulate == "resend_rejected":
        assert first_resend.outcomes == {"pending": 1}  # retried later, not settled


def test_the_first_dispatchs_no_write_still_fails_safe_even_a_reused_key(
    xworld: ExecutionWorld,
) -> None:
    """On its first dispatch the provider cannot have seen the attempt's key: a 422 there
    is a refusal like any other 4xx, and the attempt is failed_safe at once."""
    attempt_id = xworld.approved("provider_idempotency")
    refusal = ExecutorKeyReused(reason_code="provider_rejected_422")
    xworld.swap_executor(IDEMPOTENT, lambda inner: Refusing(inner, refusal))
    assert xworld.worker().process(attempt_id) is Outcome.FAILED_SAFE
    attempt = xworld.attempt(attempt_id)
    assert attempt.result is not None and attempt.result["reason_code"] == "provider_rejected_422"


@pytest.mark.parametrize("mode", ["correlation_lookup", "operator_reconciliation_only"])
@pytest.mark.parametrize("simulate", ["resend_rejected", "resend_key_reused"])
def test_modes_without_a_re_send_never_meet_the_refusal(
    xworld: ExecutionWorld, mode: str, simulate: str
) -> None:
    """correlation_lookup looks the key up after the lease, operator_reconciliation_only
    leaves it to a human: neither calls the executor twice, so no refusal arrives."""
    attempt_id = xworld.approved(mode, simulate)
    xworld.worker().process(attempt_id)
    for _ in range(3):
        xworld.recover_after_lease()

    attempt = xworld.attempt(attempt_id)
    expected = "succeeded" if mode == "correlation_lookup" else "outcome_unknown"
    assert attempt.status.value == expected
    assert xworld.calls_for(attempt_id) == 1
    assert xworld.effects.effect_count(attempt.idempotency_key) == 1


def test_a_refusal_on_the_last_allowed_dispatch_ends_outcome_unknown(
    xworld: ExecutionWorld,
) -> None:
    """With a budget of two dispatches the one re-send is refused, then recovery stops."""
    attempt_id = xworld.approved("provider_idempotency", "resend_rejected")
    worker = xworld.worker(max_dispatches=2)
    worker.process(attempt_id)
    assert xworld.recover_after_lease(worker).outcomes == {"pending": 1}
    assert xworld.recover_after_lease(worker).outcomes == {"outcome_unknown": 1}
    attempt = xworld.attempt(attempt_id)
    assert attempt.result is not None and attempt.result["reason_code"] == "dispatch_limit"
    assert xworld.calls_for(attempt_id) == 2
