"""The status view of an execution attempt: redacted, what status queries read.

Never spec content, tokens, idempotency keys or raw provider data (I10): only
ids, states, timestamps, the bounded reason code and the validated receipt.
"""

from __future__ import annotations

from typing import Any

from domain.attempt import ExecutionAttempt
from projections.ports import ViewRecord


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


STATUS_VIEW = "attempt_status"


def status_list_key(status: str) -> str:
    """The list partition of attempts in one status."""
    return f"status#{status}"


def status_record(attempt: ExecutionAttempt) -> ViewRecord:
    """The stored status view: the redacted view plus what access checks need.

    Listed by status, oldest change first (the attention list reads the
    ``outcome_unknown``, ``effect_after_no_effect`` and ``failed_safe`` lists).
    """
    data = attempt_status_view(attempt)
    data["owner_actor_id"] = attempt.actor_id
    data["chain_head"] = attempt.chain_head
    return ViewRecord(
        name=STATUS_VIEW,
        key=attempt.id,
        version=attempt.version,
        data=data,
        list_pk=status_list_key(attempt.status.value),
        list_sk=f"{attempt.updated_at}#{attempt.id}",
    )


def public_view(data: dict[str, Any] | Any) -> dict[str, Any]:
    """The stored view without the fields that are only for the ledger itself."""
    return {k: v for k, v in dict(data).items() if k not in ("owner_actor_id", "chain_head")}
