"""`ledger serve` as a real process: a free loopback port, the command, the wait;
and a threaded HTTP server on loopback for the fakes that stand in for other systems."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

START_TIMEOUT_SECONDS = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ledger_command() -> list[str]:
    script = Path(sys.executable).with_name("ledger")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from api.cli import main; main()"]


def wait_until_up(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"ledger serve exited early:\n{log.read_text()}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"ledger serve did not answer within {START_TIMEOUT_SECONDS}s")


def serve_on_loopback(
    handle: Callable[[BaseHTTPRequestHandler, str], None], port: int = 0
) -> ThreadingHTTPServer:
    """A threaded HTTP server on 127.0.0.1 whose GETs and POSTs go to
    ``handle(request, method)``, serving on a daemon thread until shut down."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            handle(self, "POST")

        def do_GET(self) -> None:
            handle(self, "GET")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return server


def reply_json(
    request: BaseHTTPRequestHandler,
    status: int,
    body: Any,
    content_type: str = "application/json",
) -> None:
    """Answer ``request`` with ``body`` as JSON; a client that went away is ignored."""
    data = json.dumps(body).encode()
    try:
        request.send_response(status)
        request.send_header("content-type", content_type)
        request.send_header("content-length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)
    except OSError:
        pass


def append_json_line(path: Path | None, lock: AbstractContextManager[Any], entry: Any) -> None:
    """One JSON line appended to ``path`` (nothing without a path), under ``lock``."""
    if path is not None:
        with lock, path.open("a") as out:
            out.write(json.dumps(entry) + "\n")


def serve_until_signalled(stop: Callable[[], None]) -> None:
    """Block until SIGTERM or SIGINT, then ``stop()``: a fake run as its own process."""
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    stopped.wait()
    stop()
