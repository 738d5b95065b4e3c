"""Webhook deliveries (SPEC 12), for admins: the records by status, and a redeliver."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from adapters.webhooks.deliverer import redeliver
from api.http.cursors import decode_cursor, encode_cursor
from api.http.deps import AdminCaller, LedgerDep, known_id
from api.http.errors import error_responses
from api.http.schemas.webhooks import DeliveryListOut, DeliveryOut
from domain.errors import NotFound
from projections.webhooks import DeliveryStatus, delivery_list_key, listed

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
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> DeliveryListOut:
    """Delivery records in one status (``failing``: not acknowledged yet, with the
    error class, the receiver's status code and when the next try is due)."""
    assert ledger.views is not None
    rows, next_raw = ledger.views.list_views(
        delivery_list_key(status.value), limit, decode_cursor(cursor)
    )
    return DeliveryListOut(
        items=[DeliveryOut.model_validate(listed(r.data)) for r in rows],
        next_cursor=encode_cursor(next_raw),
    )


@router.post("/{delivery_id}/redeliver")
def redeliver_delivery(delivery_id: str, caller: AdminCaller, ledger: LedgerDep) -> DeliveryOut:
    """Send one delivery again now (a failing one at once, a delivered one once more)."""
    assert ledger.views is not None
    found = redeliver(ledger.views, known_id(delivery_id), ledger.clock)
    if found is None:
        raise NotFound()
    return DeliveryOut.model_validate(listed(found))
