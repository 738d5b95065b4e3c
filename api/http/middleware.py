"""Pure ASGI middleware: a request body limit, the last-resort error boundary,
and request metrics and spans."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from opentelemetry.trace import SpanKind
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapters.metrics import Metrics, safe_route
from adapters.tracing import OtelTracer
from api.http.errors import HTTP_ERRORS, INTERNAL_ERROR

logger = logging.getLogger("ledger.api")

DEFAULT_MAX_BODY_BYTES = 64 * 1024


async def _send_error(send: Send, status: int, code: str, detail: str) -> None:
    body = json.dumps({"error": code, "detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """Reject request bodies over ``max_bytes`` with 413 before any route sees them.

    The body is buffered (it is small by construction) and replayed to the app,
    so the limit holds for chunked uploads without a Content-Length too.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        code, detail = HTTP_ERRORS[413]
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = self.max_bytes + 1
                if declared > self.max_bytes:
                    await _send_error(send, 413, code, detail)
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _send_error(send, 413, code, detail)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class ErrorBoundaryMiddleware:
    """Turn any unhandled exception into a bare 500 body.

    Logs the exception type only: messages and tracebacks may carry request
    content, which must never reach a log line (I10).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            logger.error("unhandled error: %s", type(exc).__name__)
            if not started:
                await _send_error(send, 500, *INTERNAL_ERROR)


class ObservabilityMiddleware:
    """Request latency by route template, and a server span per request.

    The route label and span name are the matched *template* (``/x/{id}``),
    never the concrete path, so ids stay out of labels; an unmatched path is
    ``other``. The status label is the class (``2xx``...). A trace context
    sent by the caller (``traceparent``) is continued. The metrics and the
    tracer are those of the app's ledger (``app.state.ledger``), read per
    request as the routes read it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ledger = scope["app"].state.ledger
        metrics: Metrics = ledger.metrics
        tracer = ledger.tracer if isinstance(ledger.tracer, OtelTracer) else None
        started = time.perf_counter()
        status = 500

        async def status_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        method = str(scope.get("method", "GET"))
        method_label = method if method in _METHODS else "other"
        try:
            if tracer is None:
                await self.app(scope, receive, status_send)
            else:
                parent = {
                    k.decode("latin-1"): v.decode("latin-1")
                    for k, v in scope.get("headers", [])
                    if k in (b"traceparent", b"tracestate")
                }
                with tracer.span(
                    f"{method_label} request",
                    {"http.request.method": method_label},
                    parent=parent or None,
                    kind=SpanKind.SERVER,
                ) as span:
                    try:
                        await self.app(scope, receive, status_send)
                    finally:
                        route = _route_template(scope)
                        span.set("http.route", route)
                        span.set("http.response.status_code", status)
                        _rename(route, method_label)
        finally:
            metrics.observe(
                "ledger_http_request_duration_seconds",
                time.perf_counter() - started,
                method=method_label,
                route=_route_template(scope),
                status=f"{status // 100}xx",
            )


_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


def include(app: Any, router: Any, prefix: str = "") -> None:
    """``app.include_router(router, prefix=prefix)``, noting the full template of each
    of its routes (prefix included) for the metrics' ``route`` label.

    Recent FastAPI builds an included router's route contexts (a pydantic adapter
    per parameter) on first use; finding the template among them on the first
    request built every route of the app at once, about half a second of CPU on a
    small machine, paid by every fresh app (each test's). The templates noted here
    cost nothing."""
    app.include_router(router, prefix=prefix)
    templates = getattr(app.state, "route_templates", None)
    if templates is None:
        templates = app.state.route_templates = {}
    for route in router.routes:
        templates.setdefault(id(route), prefix + str(getattr(route, "path", "")))


def _route_template(scope: Scope) -> str:
    """The full template of the matched route (prefix included), or ``other``."""
    route = scope.get("route")
    if route is None:
        return safe_route(None)
    state = getattr(scope.get("app"), "state", None)
    templates: dict[int, str] = getattr(state, "route_templates", None) or {}
    found = templates.get(id(route))
    return safe_route(found if found is not None else getattr(route, "path", None))


def _rename(route: str, method: str) -> None:
    from opentelemetry import trace

    span = trace.get_current_span()
    if span.is_recording():
        span.update_name(f"{method} {route}")
