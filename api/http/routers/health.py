"""Liveness and readiness probes (no authentication) and the metrics page (a scraper's token)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse

from adapters.metrics import CONTENT_TYPE
from api.http.deps import LedgerDep, require_metrics
from api.http.errors import error_responses
from domain.errors import StoreUnavailable

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up; says nothing about the store."""
    return {"status": "ok"}


@router.get("/readyz", responses=error_responses(503))
def readyz(ledger: LedgerDep) -> dict[str, Any]:
    """The store answers a read (503 store_unavailable otherwise); ``details``
    has each subscriber's lag (events behind, age of the oldest unapplied event)
    where this process can know it."""
    if not ledger.ready():
        raise StoreUnavailable("The store is not answering.")
    try:
        lags = {name: lag.as_dict() for name, lag in ledger.projection_lag().items()}
    except Exception:  # readiness is the store answering; lag is a detail
        lags = {}
    return {"status": "ready", "details": {"projections": lags}}


# The page is text, its refusals the uniform JSON body: say both in the schema.
_METRICS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}}},
    **{
        status: {
            "description": text,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
        }
        for status, text in ((401, "Unauthorized"), (403, "Forbidden"))
    },
}


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    dependencies=[Depends(require_metrics)],
    responses=_METRICS_RESPONSES,
)
def metrics(ledger: LedgerDep) -> PlainTextResponse:
    """Prometheus metrics, for a scraper with a ``metrics`` role token only.

    Labels carry no ids or content, and refusals are not broken down by reason
    (I10). ``LEDGER_METRICS_LISTEN`` serves the same page on a separate address.
    """
    return PlainTextResponse(ledger.metrics.render(), media_type=CONTENT_TYPE)
