"""``ledger serve``'s HTTP server: uvicorn on h11 with slow-client bounds.

uvicorn times out idle keep-alive connections but never a request that is
still being sent: a client that sends half its headers (or half its body)
holds a connection and a file descriptor forever, and enough of them starve
the process of descriptors (1,100 of them made ``/healthz`` time out at a
1,024-descriptor limit). This protocol adds, per connection:

- a header deadline: the request line and headers must arrive within
  ``header_timeout`` seconds of the connection (or of the previous response);
- a body deadline: the body must arrive within ``body_timeout`` seconds of the
  headers;
- a connection cap: when ``max_connections`` are open, a new connection
  evicts the oldest one that has not finished sending its request (a fast,
  complete request is never evicted), so a newcomer like a health probe is
  served while the slow ones wait for their deadline.

A connection past a deadline is closed without an answer; the ASGI app sees
``http.disconnect``. The cap is held under the process's descriptor limit.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from dataclasses import dataclass, replace
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("ledger.http")

ACCEPT_BACKLOG = 32
"""asyncio accepts up to this many sockets in one go before any protocol sees
them, so the cap can be overshot by a few batches while evictions land."""

DESCRIPTORS_KEPT_FOR_THE_APP = 64 + 3 * ACCEPT_BACKLOG
"""Descriptors left for the store, the worker, logs, the listening socket and
the accept batches in flight."""

MAX_HEADER_BYTES = 16 * 1024


@dataclass(frozen=True)
class ServeLimits:
    """Bounds ``ledger serve`` holds every connection to (LEDGER_HTTP_* settings)."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: int = 5
    max_connections: int = 512

    def within_descriptors(self, soft_limit: int | None = None) -> ServeLimits:
        """The same limits with ``max_connections`` lowered to fit the descriptor limit."""
        if soft_limit is None:
            soft_limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft_limit == resource.RLIM_INFINITY:
            return self
        room = max(1, soft_limit - DESCRIPTORS_KEPT_FOR_THE_APP)
        return self if self.max_connections <= room else replace(self, max_connections=room)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header/body deadlines and a connection cap."""

    limits = ServeLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._reading_body = False
        self.last_start = 0.0

    # uvicorn's own H11Protocol narrows asyncio's BaseTransport to Transport the same way.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections:
            self._evict_one()
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_headers()  # the next request on this connection
            self._follow_request()  # ...which may already be buffered (pipelining)

    # -- deadlines -------------------------------------------------------------

    def _await_headers(self) -> None:
        self._reading_body = False
        self.last_start = self.loop.time()
        self._arm(self.limits.header_timeout)

    def _follow_request(self) -> None:
        """Move from the header deadline to the body deadline, or drop both."""
        state = self.conn.their_state
        if state is h11.SEND_BODY and not self._reading_body:
            self._reading_body = True
            self._arm(self.limits.body_timeout)
        elif state is not h11.IDLE and state is not h11.SEND_BODY:
            self._cancel_deadline()  # the whole request is in

    def _arm(self, seconds: float) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(seconds, self._expire)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _still_sending(self) -> bool:
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY)

    def _expire(self) -> None:
        self._deadline = None
        if self._still_sending() and not self.transport.is_closing():
            self.transport.close()

    def _evict_one(self) -> None:
        """Close the connection that has waited longest for its own request."""
        waiting = [
            c
            for c in self.connections
            if isinstance(c, GuardedH11Protocol)
            and c._still_sending()
            and not c.transport.is_closing()
        ]
        if waiting:
            oldest = min(waiting, key=lambda c: c.last_start)
            oldest._cancel_deadline()
            oldest.transport.close()


def guarded_protocol(limits: ServeLimits) -> type[GuardedH11Protocol]:
    """A protocol class bound to these limits (uvicorn instantiates it per connection)."""
    return type("LedgerH11Protocol", (GuardedH11Protocol,), {"limits": limits})


def serve_http(app: Any, *, host: str, port: int, limits: ServeLimits) -> None:
    """Run uvicorn with the guarded protocol until interrupted."""
    import uvicorn

    fitted = limits.within_descriptors()
    if fitted.max_connections < limits.max_connections:
        logger.warning(
            "serving at most %d connections (the file descriptor limit leaves no "
            "room for LEDGER_HTTP_MAX_CONNECTIONS=%d)",
            fitted.max_connections,
            limits.max_connections,
        )
    # log_config=None: uvicorn's own lines go through the root handler (the ledger's
    # text or JSON format and the redaction filter) instead of a handler of its own.
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="info",
        access_log=False,
        log_config=None,
        http=guarded_protocol(fitted),
        timeout_keep_alive=fitted.keep_alive_timeout,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        backlog=ACCEPT_BACKLOG,
    )
