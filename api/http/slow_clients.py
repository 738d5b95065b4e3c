"""Slow-client bounds for ``ledger serve``: a header deadline, a body deadline and
a connection cap that evicts the slowest sender.

uvicorn's public settings bound an idle keep-alive connection
(``timeout_keep_alive``), the size of the headers
(``h11_max_incomplete_event_size``) and the number of connections, by
answering 503 past ``limit_concurrency``; none of them times out a request
that is still being sent. A client that sends half its headers (or half its
body) holds a connection and a file descriptor forever, and enough of them
starve the process of descriptors (1,100 of them made ``/healthz`` time out
at a 1,024-descriptor limit), and a 503 past a cap would refuse the health
probe just the same. So each connection's protocol is wrapped here:

- a header deadline: the request line and headers must arrive within
  ``header_timeout`` seconds of the connection, or of the first byte of a
  later request on it (between requests uvicorn's keep-alive timeout holds);
- a body deadline: the body must arrive within ``body_timeout`` seconds of
  the headers;
- a connection cap: when ``max_connections`` are open, a new connection
  evicts the one that has waited longest for its own request to arrive (a
  complete request is never evicted), so a newcomer like a health probe is
  served while the slow ones wait for their deadline.

A connection past a deadline is closed without an answer; the ASGI app sees
``http.disconnect``.

The wrapper is an ``asyncio.Protocol`` of its own (uvicorn's ``http`` setting
takes a protocol class). It follows each request with ``h11``, the parser
uvicorn's h11 protocol uses, on the bytes as they arrive, and hands every
call on to that protocol unchanged. What it takes from uvicorn beyond its
public configuration is only where that protocol class lives (the class
``--http h11`` names) and that uvicorn builds a protocol with keyword
arguments, which are passed on unread. No public API offers the deadlines;
``tests/unit/test_slow_client_guard.py`` fails loudly if an upgrade moves
either, and ``tests/hardening/test_slow_client_guard.py`` runs the bounds on
a real server.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol as UvicornH11

MAX_HEADER_BYTES = 16 * 1024


class Phase(enum.Enum):
    """Where a connection's current request is."""

    WAITING = "waiting"  # a new connection: no byte of its first request yet
    HEADERS = "headers"
    BODY = "body"
    IN = "in"  # the whole request arrived: the app has it
    UNTRACKED = "untracked"  # a protocol switch or a request h11 refuses: uvicorn answers it


class GuardedProtocol(asyncio.Protocol):
    """uvicorn's h11 protocol behind header/body deadlines and a connection cap."""

    header_timeout: ClassVar[float] = 10.0
    body_timeout: ClassVar[float] = 30.0
    max_connections: ClassVar[int] = 512
    connections: ClassVar[set[GuardedProtocol]] = set()

    def __init__(self, **kwargs: Any) -> None:
        self.inner: asyncio.Protocol = UvicornH11(**kwargs)
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = self._new_parser()
        self.phase = Phase.WAITING
        self.waiting_since = self.loop.time()
        self._deadline: asyncio.TimerHandle | None = None

    @staticmethod
    def _new_parser() -> h11.Connection:
        return h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)

    # -- asyncio.Protocol, handed on ---------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if len(self.connections) >= self.max_connections:
            self._evict_one()
        self.connections.add(self)
        self._arm(self.header_timeout)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._follow(data)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self.connections.discard(self)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # -- following the request ------------------------------------------------------

    def _follow(self, data: bytes) -> None:
        if self.phase is Phase.UNTRACKED:
            return
        if self.phase is Phase.IN:  # the first byte of the next request
            self._next_request()
        elif self.phase is Phase.WAITING:
            self.phase = Phase.HEADERS
        try:
            self.parser.receive_data(data)
            self._advance()
        except h11.RemoteProtocolError:  # uvicorn's own parser refuses it too, and answers
            self._untrack()

    def _advance(self) -> None:
        while True:
            event = self.parser.next_event()
            if event is h11.NEED_DATA:
                return
            if isinstance(event, h11.Request) and self.parser.their_state is h11.SEND_BODY:
                self.phase = Phase.BODY
                self._arm(self.body_timeout)
            elif isinstance(event, h11.EndOfMessage):
                self.phase = Phase.IN
                self._cancel()
                pipelined, _ = self.parser.trailing_data
                if not pipelined:
                    return
                self._next_request()  # pipelined: the next request is already here
                self.parser.receive_data(pipelined)
            elif event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                self._untrack()  # a protocol switch (an upgrade), or a close
                return

    def _next_request(self) -> None:
        self.parser = self._new_parser()
        self.phase = Phase.HEADERS
        self.waiting_since = self.loop.time()
        self._arm(self.header_timeout)

    def _untrack(self) -> None:
        self.phase = Phase.UNTRACKED
        self._cancel()

    # -- deadlines and eviction -----------------------------------------------------

    def _arm(self, seconds: float) -> None:
        self._cancel()
        self._deadline = self.loop.call_later(seconds, self._expire)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def still_sending(self) -> bool:
        """The connection waits for its own request (or the rest of it)."""
        return self.phase in (Phase.WAITING, Phase.HEADERS, Phase.BODY)

    def _close(self) -> None:
        self._cancel()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def _expire(self) -> None:
        self._deadline = None
        if self.still_sending():
            self._close()

    def _evict_one(self) -> None:
        """Close the connection that has waited longest for its own request."""
        waiting = [
            c
            for c in self.connections
            if c.still_sending() and c.transport is not None and not c.transport.is_closing()
        ]
        if waiting:
            min(waiting, key=lambda c: c.waiting_since)._close()


def guarded_protocol(
    *, header_timeout: float, body_timeout: float, max_connections: int
) -> type[GuardedProtocol]:
    """A protocol class bound to these limits, with a connection set of its own
    (uvicorn makes one instance per connection)."""
    bound: type[GuardedProtocol] = type(
        "LedgerHttpProtocol",
        (GuardedProtocol,),
        {
            "header_timeout": header_timeout,
            "body_timeout": body_timeout,
            "max_connections": max_connections,
            "connections": set(),
        },
    )
    return bound
