"""``ledger serve``'s HTTP server: uvicorn on h11 with slow-client bounds.

uvicorn's own settings bound idle keep-alive connections and the size of the
headers; the header and body deadlines and the connection cap are
held by the protocol of ``api.http.slow_clients``, which says why it is
needed. The cap is held under the process's descriptor limit.

The server runs on a thread of its own (:class:`HttpServer`), so the
process's signal handling decides how ``ledger serve`` stops, not uvicorn's
(which would re-raise ``SIGTERM`` and end the process before the worker has
recorded what it was executing): ``shutdown`` is uvicorn's graceful shutdown,
which stops accepting, lets the requests in flight finish (at most the grace
period) and then closes the connections.
"""

from __future__ import annotations

import logging
import math
import resource
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from api.http.slow_clients import MAX_HEADER_BYTES, guarded_protocol

if TYPE_CHECKING:
    from adapters.settings import Settings

logger = logging.getLogger("ledger.http")

ACCEPT_BACKLOG = 32
"""asyncio accepts up to this many sockets in one go before any protocol sees
them, so the cap can be overshot by a few batches while evictions land."""

DESCRIPTORS_KEPT_FOR_THE_APP = 64 + 3 * ACCEPT_BACKLOG
"""Descriptors left for the store, the worker, logs, the listening socket and
the accept batches in flight."""


@dataclass(frozen=True)
class ServeLimits:
    """Bounds ``ledger serve`` holds every connection to (LEDGER_HTTP_* settings)."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: int = 5
    max_connections: int = 512

    @classmethod
    def from_settings(cls, settings: Settings) -> ServeLimits:
        """The limits the ``LEDGER_HTTP_*`` settings give."""
        return cls(
            header_timeout=settings.http_header_timeout_seconds,
            body_timeout=settings.http_body_timeout_seconds,
            keep_alive_timeout=settings.http_keep_alive_seconds,
            max_connections=settings.http_max_connections,
        )

    def within_descriptors(self, soft_limit: int | None = None) -> ServeLimits:
        """The same limits with ``max_connections`` lowered to fit the descriptor limit."""
        if soft_limit is None:
            soft_limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft_limit == resource.RLIM_INFINITY:
            return self
        room = max(1, soft_limit - DESCRIPTORS_KEPT_FOR_THE_APP)
        return self if self.max_connections <= room else replace(self, max_connections=room)


class HttpServer:
    """uvicorn with the slow-client bounds, on a thread: ``start``, ``shutdown``, ``wait``."""

    def __init__(
        self, app: Any, *, host: str, port: int, limits: ServeLimits, grace: float
    ) -> None:
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
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="info",
            access_log=False,
            log_config=None,
            http=guarded_protocol(
                header_timeout=fitted.header_timeout,
                body_timeout=fitted.body_timeout,
                max_connections=fitted.max_connections,
            ),
            timeout_keep_alive=fitted.keep_alive_timeout,
            h11_max_incomplete_event_size=MAX_HEADER_BYTES,
            backlog=ACCEPT_BACKLOG,
            timeout_graceful_shutdown=math.ceil(grace),
        )
        self.server = uvicorn.Server(config)
        # Not the main thread: uvicorn leaves the signals to the process.
        self.thread = threading.Thread(target=self.server.run, name="ledger-http", daemon=True)

    def start(self) -> bool:
        """Serve; True once listening, False when it could not start (uvicorn has
        logged why, e.g. the port is in use)."""
        self.thread.start()
        while self.thread.is_alive() and not self.server.started:
            self.thread.join(0.05)
        return bool(self.server.started) and self.thread.is_alive()

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

    def shutdown(self) -> None:
        """Stop accepting; the requests in flight finish within the grace period."""
        self.server.should_exit = True

    def wait(self, timeout: float) -> bool:
        """True once the server has finished (at most ``timeout`` seconds)."""
        self.thread.join(max(0.0, timeout))
        return not self.thread.is_alive()
