"""The http executor's transport on loopback: the deadline bounds the whole
exchange (even answer headers trickled a byte at a time, which no per-operation
timeout bounds), and httpcore's errors surface as httpx's."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from adapters.executors.http_transport import DeadlineTransport, until


@contextlib.contextmanager
def trickling_server(interval: float) -> Iterator[tuple[str, threading.Event]]:
    """A server that answers every request with its status line and headers one
    byte every ``interval`` seconds; the event is set once a connection came."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    connected = threading.Event()
    stop = threading.Event()
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Padding: " + b"x" * 200 + b"\r\n\r\nok"

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            connected.set()
            with conn:
                conn.recv(65536)
                for byte in answer:
                    if stop.wait(interval):
                        return
                    conn.sendall(bytes([byte]))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/", connected
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def test_headers_trickled_a_byte_at_a_time_cannot_hold_the_call_past_its_deadline() -> None:
    with (
        trickling_server(0.05) as (url, _),
        httpx.Client(transport=DeadlineTransport()) as client,
    ):
        started = time.monotonic()
        # each read gets a byte well within the 5 s read timeout: only the deadline ends it
        with until(started + 0.5), pytest.raises(httpx.ReadTimeout):
            client.get(url, timeout=5.0)
        assert time.monotonic() - started < 0.5 + 0.5


def test_a_deadline_already_passed_opens_no_connection() -> None:
    with (
        trickling_server(0.05) as (url, connected),
        httpx.Client(transport=DeadlineTransport()) as client,
    ):
        with until(time.monotonic() - 1), pytest.raises(httpx.ConnectTimeout):
            client.get(url, timeout=5.0)
        assert not connected.wait(0.2)


def test_without_a_deadline_the_timeouts_apply_and_errors_are_httpx_errors() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # bound, not listening: refused
        with (
            httpx.Client(transport=DeadlineTransport()) as client,
            pytest.raises(httpx.ConnectError),
        ):
            client.get(f"http://127.0.0.1:{port}/", timeout=2.0)
