"""The FastAPI app factory: settings (and optionally a wired ledger) -> app.

Nothing happens at import time. ``create_app`` builds the token verifier and,
unless one is injected, the ledger; a ledger the app built is closed on
shutdown. Routers are included below, one per resource.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from adapters.audit.signing import check_signing_key
from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import Settings
from api.console.routes import install_console
from api.http.auth import TokenVerifier
from api.http.errors import install_error_handlers
from api.http.middleware import (
    DEFAULT_MAX_BODY_BYTES,
    BodyLimitMiddleware,
    ErrorBoundaryMiddleware,
    ObservabilityMiddleware,
    include,
)
from api.http.routers import (
    approvals,
    attempts,
    audit,
    declines,
    directory,
    executors,
    health,
    policies,
    proposals,
    standing_grants,
    webhooks,
)
from api.service.idempotency import API_PREFIX
from api.version import package_version

__all__ = ["API_PREFIX", "create_app"]


def create_app(
    settings: Settings,
    *,
    ledger: Ledger | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """Build the HTTP API; tests inject ``ledger`` (with a fixed clock, a memory store...)."""
    verifier = TokenVerifier.from_settings(settings)
    check_signing_key(settings.audit_signing_key)  # GET /audit/digest signs with it
    owns_ledger = ledger is None
    wired = ledger if ledger is not None else build_ledger(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if owns_ledger:
            wired.close()

    app = FastAPI(
        title="Execution ledger",
        summary="Approved external actions, executed at most once, audited by construction.",
        version=package_version(),
        docs_url="/docs",
        openapi_url="/openapi.json",
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.ledger = wired
    app.state.verifier = verifier
    app.state.idempotency_in_flight = wired.in_flight  # shared by every entry point

    install_error_handlers(app)
    # The last middleware added runs first: metrics and spans see every answer,
    # the error boundary's 500 included.
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(ErrorBoundaryMiddleware)
    app.add_middleware(ObservabilityMiddleware)

    include(app, health.router)
    include(app, directory.router, prefix=API_PREFIX)
    include(app, executors.router, prefix=API_PREFIX)
    include(app, proposals.router, prefix=API_PREFIX)
    include(app, approvals.router, prefix=API_PREFIX)
    include(app, declines.router, prefix=API_PREFIX)
    include(app, attempts.router, prefix=API_PREFIX)
    include(app, audit.router, prefix=API_PREFIX)
    include(app, webhooks.router, prefix=API_PREFIX)
    include(app, policies.router, prefix=API_PREFIX)
    include(app, standing_grants.router, prefix=API_PREFIX)
    install_console(app)
    return app
