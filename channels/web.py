"""The HTTP side every channel shares: the intake, the ledger's webhooks, health.

- ``POST /presentations`` (bearer: the intake token): a proposer, or the MCP
  server, hands over a presentation to deliver (docs/channels.md gives the
  body). It answers ``202 {"presentation_id", "status": "sent" | "queued"}``;
  the same body again sends nothing new. Errors are ``{"error", "detail"}``
  and never repeat a value of the request.
- ``POST /ledger/events``: the ledger's signed webhooks (Standard Webhooks,
  checked with the client's ``WebhookVerifier``); ``400`` when the signature
  or timestamp does not verify.
- ``GET /healthz``.

Each platform adds its own route (``channels.telegram.routes``,
``channels.slack.routes``). Every body is bounded (``MAX_BODY_BYTES``).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from datetime import datetime
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, SecretStr
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from channels.ledger import Asserted
from channels.service import ChannelService, Intake, IntakeError
from ledger_client import WebhookVerifier
from ledger_client.errors import WebhookVerificationError

MAX_BODY_BYTES = 256 * 1024
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,199}$"


def error(status: int, code: str, detail: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


class ProvenanceIn(BaseModel):
    """Who the presentation is for: exactly what it was made to in the ledger."""

    model_config = ConfigDict(extra="forbid")

    actor_id: Annotated[str, Field(pattern=_ID)]
    identity_binding_id: Annotated[str, Field(pattern=_ID)]
    channel_binding_id: Annotated[str, Field(pattern=_ID)]
    conversation_key: Annotated[str, Field(min_length=1, max_length=200)]


class PresentationIn(BaseModel):
    """A presentation to deliver: the token from ``POST /proposals/{id}/presentations``,
    the preview from ``POST /proposals``, and who it was made for."""

    model_config = ConfigDict(extra="forbid")

    token: Annotated[SecretStr, Field(min_length=16, max_length=512)]
    presentation_id: Annotated[str, Field(pattern=r"^pres_[A-Za-z0-9_\-]{1,200}$")]
    proposal_id: Annotated[str, Field(pattern=r"^prop_[A-Za-z0-9_\-]{1,200}$")]
    version: Annotated[int, Field(ge=1, le=1_000_000)]
    expires_at: AwareDatetime = Field(
        description="When the approval ends: the presentation's expires_at, or the spec's "
        "if that is sooner."
    )
    preview: Annotated[str, Field(min_length=1, max_length=40_000)]
    provenance: ProvenanceIn


class PresentationOut(BaseModel):
    """``sent``: the platform has the message; ``queued``: it will, when it answers."""

    presentation_id: str
    status: str


class BodyLimit:
    """Refuses a request body over ``limit`` bytes (413) before the app reads it whole."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await error(413, "payload_too_large", "The body is too large.")(scope, receive, send)
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge()
            return message

        try:
            await self.app(scope, bounded, send)
        except _TooLarge:
            await error(413, "payload_too_large", "The body is too large.")(scope, receive, send)


class _TooLarge(Exception):
    pass


class _Unauthenticated(Exception):
    pass


def bearer_matches(request: Request, expected: str) -> bool:
    """Constant-time comparison of the bearer token with ``expected``."""
    header = request.headers.get("authorization", "")
    scheme, _, offered = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        offered.strip().encode(), expected.encode()
    )


def create_app(
    service: ChannelService,
    *,
    intake_token: str,
    webhook_verifier: WebhookVerifier,
    title: str,
    platform_routes: Callable[[FastAPI], None],
) -> FastAPI:
    """The channel's HTTP app: shared routes plus the platform's own."""
    app = FastAPI(title=title, docs_url="/docs", redoc_url=None)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():  # the location and the message; never the input
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            problems.append(f"{where}: {err.get('msg', 'invalid')}" if where else err.get("msg"))
        return error(422, "invalid_input", "; ".join(str(p) for p in problems)[:500])

    @app.exception_handler(_Unauthenticated)
    async def _unauthenticated(request: Request, exc: _Unauthenticated) -> JSONResponse:
        return error(
            401, "unauthenticated", "Send the intake token.", **{"WWW-Authenticate": "Bearer"}
        )

    def intake_caller(request: Request) -> None:
        """Checked before the body is read or validated."""
        if not bearer_matches(request, intake_token):
            raise _Unauthenticated()

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "channel": service.platform.name}

    @app.post(
        "/presentations",
        status_code=202,
        response_model=PresentationOut,
        dependencies=[Depends(intake_caller)],
    )
    async def present(body: PresentationIn) -> Response:
        item = Intake(
            token=body.token.get_secret_value(),
            presentation_id=body.presentation_id,
            proposal_id=body.proposal_id,
            version=body.version,
            expires_at=datetime.fromisoformat(body.expires_at.isoformat()),
            preview=body.preview,
            provenance=Asserted(**body.provenance.model_dump()),
        )
        try:
            status, held = await run_in_threadpool(service.intake, item)
        except IntakeError as exc:
            return error(exc.status, exc.code, exc.detail)
        out = PresentationOut(presentation_id=held.presentation_id, status=status)
        return JSONResponse(out.model_dump(), status_code=202)

    @app.post("/ledger/events", status_code=204)
    async def ledger_events(request: Request) -> Response:
        raw = await request.body()
        try:
            event = webhook_verifier.verify(dict(request.headers), raw)
        except WebhookVerificationError:
            return error(400, "webhook_invalid", "The signature or timestamp does not verify.")
        await run_in_threadpool(service.ledger_event, event)
        return Response(status_code=204)

    platform_routes(app)
    return app
