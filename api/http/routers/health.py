"""Liveness and readiness probes (no authentication)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from adapters.metrics import render_projection_lag
from api.http.deps import LedgerDep
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


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(ledger: LedgerDep) -> str:
    """Counters in the Prometheus text format; labels carry no ids or content."""
    try:
        lag = render_projection_lag(ledger.projection_lag())
    except Exception:
        lag = ""
    return ledger.metrics.render() + lag
