"""The status view of an execution attempt: redacted, what status queries read.

Never spec content, tokens, idempotency keys or raw provider data (I10): only
ids, states, timestamps, the bounded reason code and the validated receipt.
"""

from __future__ import annotations

from typing import Any

from domain.attempt import ExecutionAttempt


def attempt_status_view(attempt: ExecutionAttempt) -> dict[str, Any]:
    """The view ``GET /execution-attempts/{id}`` returns."""
    view: dict[str, Any] = {
        "attempt_id": attempt.id,
        "proposal_id": attempt.proposal_id,
        "proposal_version": attempt.proposal_version,
        "status": attempt.status.value,
        "revision": attempt.revision,
        "delivery_mode": attempt.delivery_mode.value,
        "created_at": attempt.created_at,
        "updated_at": attempt.updated_at,
        "lease_generation": attempt.lease_generation,
    }
    if attempt.dispatch_started_at is not None:
        view["dispatch_started_at"] = attempt.dispatch_started_at
    if attempt.result is not None:
        result: dict[str, Any] = {"kind": attempt.result["kind"]}
        if "reason_code" in attempt.result:
            result["reason_code"] = attempt.result["reason_code"]
        if attempt.result.get("receipt"):
            result["receipt"] = dict(attempt.result["receipt"])
        view["result"] = result
    if attempt.resolution is not None:
        view["resolution"] = {
            key: attempt.resolution[key]
            for key in ("outcome", "reason", "resolved_by", "resolved_at")
        }
    return view
