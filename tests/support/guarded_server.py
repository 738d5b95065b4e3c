"""uvicorn in this process behind the slow-client protocol of ``api.http.slow_clients``,
on loopback, with a tiny ASGI app: ``/`` answers ``ok`` once it has read the
whole body, ``/slow`` answers after ``SLOW_SECONDS``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from api.http.slow_clients import MAX_HEADER_BYTES, guarded_protocol
from tests.support.http_server import free_port

SLOW_SECONDS = 0.6


async def tiny_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole body, then answers ``ok`` (``/slow``: after a pause)."""
    assert scope["type"] == "http"
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        if not message.get("more_body"):
            break
    if scope["path"] == "/slow":
        await asyncio.sleep(SLOW_SECONDS)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x-path", b"1")]})
    await send({"type": "http.response.body", "body": b"ok"})


@contextlib.contextmanager
def guarded_server(
    *, header_timeout: float, body_timeout: float, max_connections: int
) -> Iterator[int]:
    """The port of a running server with these bounds; stopped on exit."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(
        tiny_app,
        host="127.0.0.1",
        port=port,
        http=guarded_protocol(
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            max_connections=max_connections,
        ),
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=5,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the guarded server did not start")
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes ``sock`` (answers nothing more) within ``seconds``."""
    sock.settimeout(seconds)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def answers(sock: socket.socket, count: int, seconds: float = 5.0) -> int:
    """How many ``200`` answers arrive on ``sock`` (up to ``count``) within ``seconds``."""
    sock.settimeout(seconds)
    received = b""
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while received.count(b"HTTP/1.1 200") < count:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    return received.count(b"HTTP/1.1 200")
