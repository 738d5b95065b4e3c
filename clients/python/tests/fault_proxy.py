"""A loopback proxy in front of a real server that can lose answers or refuse once.

Rules are consumed in order, each for one matching request: ``drop`` forwards
the request, lets the server answer, and closes the connection without passing
the answer on (the client saw nothing: a lost answer); ``refuse`` answers with
a given status and headers without forwarding (503, 429). Every request is
recorded with its Idempotency-Key and, when forwarded, the server's answer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Rule:
    action: str  # "drop" or "refuse"
    method: str
    path: str  # a prefix of the request path
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass
class Seen:
    method: str
    path: str
    idempotency_key: str | None
    action: str  # "forwarded", "drop", "refuse"
    status: int | None = None
    answer: bytes = b""


class FaultProxy:
    """``proxy.url`` stands in for ``upstream``; add rules, read ``proxy.seen``."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._http = httpx.Client(timeout=60.0)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                outer._serve(self)

            do_GET = do_POST = do_PUT = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()  # a short poll: shutdown() waits for it

    def drop(self, method: str, path: str) -> None:
        """Lose the server's answer to the next matching request."""
        self.rules.append(Rule("drop", method, path))

    def refuse(self, method: str, path: str, status: int, **headers: str) -> None:
        """Answer the next matching request with ``status`` (and headers), not forwarding it."""
        body = b'{"error": "store_unavailable", "detail": "The store is unavailable."}'
        if status == 429:
            body = b"slow down"  # a gateway's throttle: not the ledger's error body
        named = {name.replace("_", "-"): value for name, value in headers.items()}
        self.rules.append(Rule("refuse", method, path, status, named, body))

    def _take(self, method: str, path: str) -> Rule | None:
        with self._lock:
            for index, rule in enumerate(self.rules):
                if rule.method == method and path.startswith(rule.path):
                    return self.rules.pop(index)
        return None

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        method, path = handler.command, handler.path
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        key = handler.headers.get("idempotency-key")
        rule = self._take(method, path.split("?")[0])
        if rule is not None and rule.action == "refuse":
            self._record(Seen(method, path, key, "refuse", rule.status))
            handler.send_response(rule.status)
            for name, value in {**rule.headers, "content-type": "application/json"}.items():
                handler.send_header(name, value)
            handler.send_header("content-length", str(len(rule.body)))
            handler.end_headers()
            handler.wfile.write(rule.body)
            return
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP}
        answer = self._http.request(method, self.upstream + path, headers=headers, content=body)
        action = "drop" if rule is not None else "forwarded"
        self._record(Seen(method, path, key, action, answer.status_code, answer.content))
        if rule is not None:  # the server answered; the client never hears it
            handler.close_connection = True
            return
        handler.send_response(answer.status_code)
        for name, value in answer.headers.items():
            if name.lower() not in HOP_BY_HOP:
                handler.send_header(name, value)
        handler.send_header("content-length", str(len(answer.content)))
        handler.end_headers()
        handler.wfile.write(answer.content)

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._http.close()
