"""Webhook deliveries, for admins: the records by status, and a redeliver."""

from __future__ import annotations

from adapters.bootstrap import Ledger
from adapters.webhooks.deliverer import DeliveryTrimmed
from adapters.webhooks.deliverer import redeliver as make_pending
from api.http.schemas.webhooks import DeliveryListOut, DeliveryOut
from api.service.cursors import DEFAULT_PAGE, decode_cursor, encode_cursor, page_size
from api.service.principal import Principal, Role, known_id, require_role
from domain.errors import NotFound
from projections.webhook_retention import is_trimmed
from projections.webhooks import DELIVERY_VIEW, DeliveryStatus, delivery_list_key, listed


def list_deliveries(
    ledger: Ledger,
    principal: Principal,
    status: DeliveryStatus,
    *,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
) -> DeliveryListOut:
    """Delivery records in one status (``failing``: not acknowledged yet, with the
    error class, the receiver's status code and when the next try is due):
    failing and pending ones by subscription, soonest next try first; delivered
    ones oldest fact first."""
    require_role(principal, Role.ADMIN)
    rows, next_raw = ledger.views.list_views(
        delivery_list_key(status.value), page_size(limit), decode_cursor(cursor)
    )
    return DeliveryListOut(
        items=[DeliveryOut.model_validate(listed(r.data)) for r in rows],
        next_cursor=encode_cursor(next_raw),
    )


def redeliver(ledger: Ledger, principal: Principal, delivery_id: str) -> DeliveryOut:
    """Send one delivery again: pending, due now (a failing one at once rather
    than after its backoff; a delivered one once more). NotFound when missing;
    ``DeliveryTrimmed`` (409) when it was delivered and trimmed after the retention."""
    require_role(principal, Role.ADMIN)
    found = make_pending(ledger.views, known_id(delivery_id), ledger.clock)
    if found is None:
        raise NotFound()
    return DeliveryOut.model_validate(listed(found))


MAX_BULK = 100


def redeliver_many(ledger: Ledger, principal: Principal, delivery_ids: list[str]) -> int:
    """Send a page of deliveries again. Every id is checked first (one batched
    read): an unknown one (NotFound) or a trimmed one (``DeliveryTrimmed``) sends
    none. Returns how many went back to pending."""
    require_role(principal, Role.ADMIN)
    if not delivery_ids or len(delivery_ids) > MAX_BULK:
        raise NotFound(f"give 1 to {MAX_BULK} deliveries")
    wanted = [known_id(i) for i in delivery_ids]
    found = ledger.views.get_views(DELIVERY_VIEW, wanted)
    missing = [i for i in wanted if i not in found]
    if missing:
        raise NotFound(f"no delivery {missing[0]}")
    for delivery_id in wanted:
        if is_trimmed(found[delivery_id].data):
            raise DeliveryTrimmed(found[delivery_id].data)
    return sum(make_pending(ledger.views, i, ledger.clock) is not None for i in wanted)
