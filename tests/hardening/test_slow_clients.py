"""Slow clients against a real ``ledger serve`` at a low descriptor limit.

Found by the adversarial pass: half-sent requests were never timed out; with a
1,024-descriptor limit, 1,100 of them made ``/healthz`` time out. Here the
server runs with a 256-descriptor limit and 400 half-sent requests (headers
cut short, and bodies cut short): ``/healthz`` still answers while they hang,
and every one of them is closed by the server within its deadline.
Loopback only; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import selectors
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.http.server import DESCRIPTORS_KEPT_FOR_THE_APP, ServeLimits
from tests.support.http_server import free_port, ledger_command, wait_until_up

DESCRIPTOR_LIMIT = 256
SLOW_CLIENTS = 400
HEADER_TIMEOUT = 1.5
BODY_TIMEOUT = 1.5
CLOSE_BOUND = HEADER_TIMEOUT + BODY_TIMEOUT + 10.0  # generous for a loaded CI machine


def _low_descriptor_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTOR_LIMIT, hard))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(
        {
            "LEDGER_STORE": "memory",
            "PYTHONUNBUFFERED": "1",
            "LEDGER_HTTP_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
            "LEDGER_HTTP_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
        }
    )
    err_log = tmp_path / "stderr.log"
    with err_log.open("wb") as err:
        process = subprocess.Popen(
            [*ledger_command(), "serve", "--no-worker", "--host", "127.0.0.1", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=_low_descriptor_limit,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(process, base + "/healthz", err_log)
            yield base, process, err_log
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def _half_sent(number: int) -> bytes:
    """Headers cut short (even numbers) or a body cut short (odd numbers)."""
    if number % 2 == 0:
        return b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
    return (
        b"POST /api/conversational/approvals HTTP/1.1\r\nHost: x\r\n"
        b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"to'
    )


def _open_half_sent(port: int, count: int) -> list[socket.socket]:
    """``count`` connections, each sent its half request once connected. They
    connect side by side: one after another, each waited out a SYN retry (about
    1 s) whenever the server's accept queue was full, 8 s for the 400."""
    connecting = selectors.DefaultSelector()
    for number in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        connecting.register(sock, selectors.EVENT_WRITE, number)
    opened: list[socket.socket] = []
    deadline = time.monotonic() + 60
    while connecting.get_map() and time.monotonic() < deadline:
        for key, _ in connecting.select(timeout=0.5):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            connecting.unregister(sock)
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
            sock.settimeout(5)
            opened.append(sock)
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                sock.sendall(_half_sent(key.data))  # (else already closed by the server)
    assert not connecting.get_map(), f"{len(connecting.get_map())} never connected"
    connecting.close()
    return opened


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(4096) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_half_sent_requests_neither_starve_healthz_nor_live_past_their_deadline(
    server: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    base, process, err_log = server
    port = int(base.rsplit(":", 1)[1])
    slow: list[socket.socket] = []
    try:
        slow = _open_half_sent(port, SLOW_CLIENTS)
        opened = time.monotonic()
        # more half-sent requests than the server has descriptors, and it still answers
        for _ in range(3):
            assert httpx.get(base + "/healthz", timeout=5.0).status_code == 200
        # every slow connection is closed by the server, none outlives the bound
        pending = list(slow)
        while pending and time.monotonic() - opened < CLOSE_BOUND:
            readable, _, _ = select.select(pending, [], [], 0.5)
            for sock in readable:
                if _closed_by_server(sock):
                    pending.remove(sock)
        assert not pending, f"{len(pending)} slow connections still open after {CLOSE_BOUND}s"
        assert process.poll() is None
        assert httpx.get(base + "/healthz", timeout=5.0).status_code == 200
    finally:
        for sock in slow:
            sock.close()
    log = err_log.read_text()
    assert "Too many open files" not in log and "Traceback" not in log
    expected = DESCRIPTOR_LIMIT - DESCRIPTORS_KEPT_FOR_THE_APP
    assert f"serving at most {expected} connections" in log


def test_a_complete_request_is_never_cut_by_the_deadlines(
    server: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    """A keep-alive client that sends whole requests keeps being served."""
    base, _, _ = server
    with httpx.Client(base_url=base, timeout=5.0) as client:
        for _ in range(20):
            assert client.get("/healthz").status_code == 200


def test_the_connection_cap_fits_under_the_descriptor_limit() -> None:
    limits = ServeLimits(max_connections=512)
    assert limits.within_descriptors(1024).max_connections == 512
    assert limits.within_descriptors(512).max_connections == 512 - DESCRIPTORS_KEPT_FOR_THE_APP
    assert limits.within_descriptors(resource.RLIM_INFINITY) == limits
