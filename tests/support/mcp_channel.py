"""A chat channel for ``ledger mcp``'s presenter: it receives each signed
presentation (the actor's token among it) and, as the actor taps "approve",
forwards the approval to the ledger's HTTP API as a channel service.

    python -m tests.support.mcp_channel --port 9000 --secret-env PRESENTER_SECRET \
        --ledger http://127.0.0.1:8001 --token-env CHANNEL_TOKEN

:class:`Channel` is the same on a thread, for tests: it keeps what it got and
approves (or declines) only when the test says so. Nothing here is part of
the ledger: a real channel (Telegram, Slack) shows the preview and waits for
the person.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from adapters.webhooks.standard import verify

API = "/api/conversational"


class Channel:
    """A loopback presenter endpoint that keeps every presentation it receives."""

    def __init__(self, secret: str, *, on_presentation: Any = None) -> None:
        self.secret = secret
        self.received: list[dict[str, Any]] = []
        self.refused = 0
        self.on_presentation = on_presentation
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        channel = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                if not verify(channel.secret, headers, body, int(time.time())):
                    with channel._lock:
                        channel.refused += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                presentation = json.loads(body)
                with channel._arrived:
                    channel.received.append(presentation)
                    channel._arrived.notify_all()
                self.send_response(204)
                self.end_headers()
                if channel.on_presentation is not None:
                    threading.Thread(
                        target=channel.on_presentation, args=(presentation,), daemon=True
                    ).start()

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/presentations"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Channel:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The first ``count`` presentations, once that many arrived."""
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)


def approve_over_http(ledger_url: str, token: str, presentation: dict[str, Any]) -> int:
    """The channel service forwards the actor's approval, asserting its provenance."""
    answer = httpx.post(
        f"{ledger_url}{API}/approvals",
        json={"token": presentation["token"], "provenance": presentation["provenance"]},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    return answer.status_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret-env", required=True)
    parser.add_argument("--ledger", required=True, help="the ledger's HTTP API root")
    parser.add_argument("--token-env", required=True, help="a channel service's token")
    args = parser.parse_args()
    token = os.environ[args.token_env]
    channel = Channel(
        os.environ[args.secret_env],
        on_presentation=lambda shown: approve_over_http(args.ledger, token, shown),
    )
    channel.server.server_close()
    channel.server = ThreadingHTTPServer(
        ("127.0.0.1", args.port), channel.server.RequestHandlerClass
    )
    channel.server.serve_forever()


if __name__ == "__main__":
    main()
