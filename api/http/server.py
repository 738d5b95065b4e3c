"""``ledger serve``'s HTTP server: uvicorn on h11 with slow-client bounds.

uvicorn's own settings bound idle keep-alive connections and the size of the
headers; the header and body deadlines and the connection cap are
held by the protocol of ``api.http.slow_clients``, which says why it is
needed. The cap is held under the process's descriptor limit.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass, replace
from typing import Any

from api.http.slow_clients import MAX_HEADER_BYTES, guarded_protocol

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

    def within_descriptors(self, soft_limit: int | None = None) -> ServeLimits:
        """The same limits with ``max_connections`` lowered to fit the descriptor limit."""
        if soft_limit is None:
            soft_limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft_limit == resource.RLIM_INFINITY:
            return self
        room = max(1, soft_limit - DESCRIPTORS_KEPT_FOR_THE_APP)
        return self if self.max_connections <= room else replace(self, max_connections=room)


def serve_http(app: Any, *, host: str, port: int, limits: ServeLimits) -> None:
    """Run uvicorn with the slow-client bounds until interrupted."""
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
        http=guarded_protocol(
            header_timeout=fitted.header_timeout,
            body_timeout=fitted.body_timeout,
            max_connections=fitted.max_connections,
        ),
        timeout_keep_alive=fitted.keep_alive_timeout,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        backlog=ACCEPT_BACKLOG,
    )
