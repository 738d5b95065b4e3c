"""Liveness and readiness probes (no authentication)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from api.http.deps import LedgerDep
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


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(ledger: LedgerDep) -> str:
    """Counters in the Prometheus text format; labels carry no ids or content."""
    return ledger.metrics.render()
