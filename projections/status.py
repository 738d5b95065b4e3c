"""The status view of an execution attempt: redacted, what status queries read.

Never spec content, tokens, idempotency keys or raw provider data (I10): only
ids, states, timestamps, the bounded reason code and the validated receipt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.attempt import ExecutionAttempt
from projections.ports import ViewRecord


def attempt_status_view(attempt: ExecutionAttempt) -> dict[str, Any]:
    """The view ``GET /execution-attempts/{id}`` returns."""
    return status_view(
        attempt_id=attempt.id,
        proposal_id=attempt.proposal_id,
        proposal_version=attempt.proposal_version,
        status=attempt.status.value,
        revision=attempt.revision,
        delivery_mode=attempt.delivery_mode.value,
        created_at=attempt.created_at,
        updated_at=attempt.updated_at,
        lease_generation=attempt.lease_generation,
        dispatch_started_at=attempt.dispatch_started_at,
        result=attempt.result,
        resolution=attempt.resolution,
    )


def status_view(
    *,
    attempt_id: str,
    proposal_id: Any,
    proposal_version: Any,
    status: str,
    revision: int,
    delivery_mode: str,
    created_at: Any,
    updated_at: Any,
    lease_generation: Any,
    dispatch_started_at: Any,
    result: Mapping[str, Any] | None,
    resolution: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The status view from an attempt's fields (the aggregate's, or the
    rebuild's fold of its stored data: ``projections.status_fold``)."""
    view: dict[str, Any] = {
        "attempt_id": attempt_id,
        "proposal_id": proposal_id,
        "proposal_version": proposal_version,
        "status": status,
        "revision": revision,
        "delivery_mode": delivery_mode,
        "created_at": created_at,
        "updated_at": updated_at,
        "lease_generation": lease_generation,
    }
    if dispatch_started_at is not None:
        view["dispatch_started_at"] = dispatch_started_at
    if result is not None:
        shown: dict[str, Any] = {"kind": result["kind"]}
        if "reason_code" in result:
            shown["reason_code"] = result["reason_code"]
        if result.get("receipt"):
            shown["receipt"] = dict(result["receipt"])
        view["result"] = shown
    if resolution is not None:
        view["resolution"] = {
            key: resolution[key] for key in ("outcome", "reason", "resolved_by", "resolved_at")
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
    return status_row(
        attempt_status_view(attempt),
        version=attempt.version,
        owner_actor_id=attempt.actor_id,
        chain_head=attempt.chain_head,
    )


def status_row(
    view: dict[str, Any], *, version: int, owner_actor_id: Any, chain_head: str
) -> ViewRecord:
    """The stored row of a status view, with what access checks and audits need."""
    view["owner_actor_id"] = owner_actor_id
    view["chain_head"] = chain_head
    key = view["attempt_id"]
    return ViewRecord(
        name=STATUS_VIEW,
        key=key,
        version=version,
        data=view,
        list_pk=status_list_key(view["status"]),
        list_sk=f"{view['updated_at']}#{key}",
    )


def public_view(data: dict[str, Any] | Any) -> dict[str, Any]:
    """The stored view without the fields that are only for the ledger itself."""
    return {k: v for k, v in dict(data).items() if k not in ("owner_actor_id", "chain_head")}
