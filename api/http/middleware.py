"""Pure ASGI middleware: a request body limit and the last-resort error boundary."""

from __future__ import annotations

import json
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.http.errors import HTTP_ERRORS, INTERNAL_ERROR

logger = logging.getLogger("ledger.api")

DEFAULT_MAX_BODY_BYTES = 64 * 1024


async def _send_error(send: Send, status: int, code: str, detail: str) -> None:
    body = json.dumps({"error": code, "detail": detail}).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    })
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
