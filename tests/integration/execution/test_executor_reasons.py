"""Executors name their own bounded reason codes; anything else is replaced (I10)."""

from __future__ import annotations

from typing import Any

import pytest

from domain.errors import ExecutorNoEffect, ExecutorReceiptUnusable
from domain.ports import ExecutionReceipt, ExecutionRequest
from tests.support.worlds.execution import MODES, ExecutionWorld


class Raising:
    def __init__(self, inner: Any, error: Exception) -> None:
        self.inner, self.error = inner, error
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status", "reason"),
    [
        (ExecutorNoEffect(), "failed_safe", "provider_no_write"),
        (
            ExecutorNoEffect(reason_code="provider_rejected_422"),
            "failed_safe",
            "provider_rejected_422",
        ),
        (
            ExecutorNoEffect(reason_code="sk_live_secret in a reason"),
            "failed_safe",
            "executor_reason_invalid",
        ),
        (ExecutorReceiptUnusable("response_not_json"), "outcome_unknown", "response_not_json"),
        (ExecutorReceiptUnusable("x" * 80), "outcome_unknown", "executor_reason_invalid"),
    ],
)
def test_the_executor_reason_is_kept_only_when_it_is_a_short_code(
    xworld: ExecutionWorld, error: Exception, status: str, reason: str
) -> None:
    attempt_id = xworld.approved("provider_idempotency")
    xworld.swap_executor(MODES["provider_idempotency"], lambda inner: Raising(inner, error))
    assert xworld.worker().process(attempt_id).value == status
    attempt = xworld.attempt(attempt_id)
    assert attempt.result is not None and attempt.result["reason_code"] == reason
    xworld.recover_after_lease()
    assert xworld.attempt(attempt_id).status.value == status  # never retried
