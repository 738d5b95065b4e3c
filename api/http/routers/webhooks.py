"""Webhook deliveries (design.md 5.10), for admins: the records by status, and a redeliver."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.http.deps import AdminCaller, LedgerDep
from api.http.errors import error_responses
from api.http.schemas.webhooks import DeliveryListOut, DeliveryOut
from api.service import webhooks
from api.service.cursors import DEFAULT_PAGE, MAX_PAGE
from projections.webhooks import DeliveryStatus

router = APIRouter(
    prefix="/webhook-deliveries",
    tags=["webhook-deliveries"],
    responses=error_responses(400, 401, 403, 404, 422, 503),
)


@router.get("")
def list_deliveries(
    caller: AdminCaller,
    ledger: LedgerDep,
    status: DeliveryStatus,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> DeliveryListOut:
    """Delivery records in one status (``failing``: not acknowledged yet, with the
    error class, the receiver's status code and when the next try is due)."""
    return webhooks.list_deliveries(ledger, caller, status, limit=limit, cursor=cursor)


@router.post("/{delivery_id}/redeliver")
def redeliver_delivery(delivery_id: str, caller: AdminCaller, ledger: LedgerDep) -> DeliveryOut:
    """Send one delivery again now (a failing one at once, a delivered one once more)."""
    return webhooks.redeliver(ledger, caller, delivery_id)
