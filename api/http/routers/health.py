"""Liveness and readiness probes (no authentication) and the metrics page (a scraper's token)."""

from __future__ import annotations

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
def readyz(ledger: LedgerDep) -> dict[str, str]:
    """The store answers a read (503 store_unavailable otherwise)."""
    if not ledger.ready():
        raise StoreUnavailable("The store is not answering.")
    return {"status": "ready"}


@router.get("/metrics", response_class=PlainTextResponse,
            dependencies=[Depends(require_metrics)], responses=error_responses(401, 403))
def metrics(ledger: LedgerDep) -> PlainTextResponse:
    """Prometheus metrics, for a scraper with a ``metrics`` role token only.

    Labels carry no ids or content, and refusals are not broken down by reason
    (I10). ``LEDGER_METRICS_LISTEN`` serves the same page on a separate address.
    """
    return PlainTextResponse(ledger.metrics.render(), media_type=CONTENT_TYPE)
