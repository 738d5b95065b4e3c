"""A webhook receiver on loopback for tests: verifies Standard Webhooks signatures
and logs every delivery it gets.

    python -m tests.support.webhook_receiver --port P --log FILE --mode-file FILE

The secret comes from the environment variable ``RECEIVER_SECRET``. Each request
appends one JSON line to ``--log``: the webhook-id, whether the signature
verified, the status answered, the headers and the body. ``--mode-file``
holds what to do with the next request: ``ok`` (204), ``500``, or ``stall``
(sleep ``--stall-seconds`` before answering 204, past the sender's timeout),
or ``ok:N`` (answer the first N, then stall every later request);
it is read on every request. "Down" is the process stopped.

:class:`Receiver` runs one as a subprocess and reads its log.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from adapters.webhooks.standard import verify

SECRET_ENV = "RECEIVER_SECRET"


def serve(port: int, log: Path, mode_file: Path, stall_seconds: float, secret: str) -> None:
    lock = threading.Lock()
    granted = [0]  # answers given in an ``ok:N`` mode

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            valid = verify(secret, headers, body, int(time.time()))
            try:
                mode = mode_file.read_text().strip() or "ok"
            except OSError:
                mode = "ok"
            if mode.startswith("ok:"):  # the first N answered, every later one stalled
                with lock:
                    mode = "ok" if granted[0] < int(mode[3:]) else "stall"
                    granted[0] += mode == "ok"
            status = 500 if mode == "500" else (204 if valid else 401)
            entry = {
                "path": self.path,
                "id": headers.get("webhook-id"),
                "valid": valid,
                "status": status,
                "mode": mode,
                "headers": headers,
                "body": body.decode("utf-8", "replace"),
            }
            with lock, log.open("a") as out:  # logged when received, before any stall
                out.write(json.dumps(entry) + "\n")
            if mode == "stall":
                time.sleep(stall_seconds)
            try:
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()
            except OSError:
                pass  # the sender gave up (timeout)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever(poll_interval=0.02)  # shutdown() waits for a poll: 0.5 s by default


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    """One receiver process on a fixed loopback port (stop and start it again to
    simulate an outage); its log survives restarts."""

    def __init__(self, folder: Path, secret: str, *, stall_seconds: float = 3.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/ledger-events"
        self.log = folder / f"receiver-{self.port}.jsonl"
        self.mode_file = folder / f"receiver-{self.port}.mode"
        self.secret = secret
        self.stall_seconds = stall_seconds
        self.process: subprocess.Popen[bytes] | None = None
        self.set_mode("ok")

    def start(self) -> Receiver:
        env = {**os.environ, SECRET_ENV: self.secret}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.webhook_receiver",
                "--port",
                str(self.port),
                "--log",
                str(self.log),
                "--mode-file",
                str(self.mode_file),
                "--stall-seconds",
                str(self.stall_seconds),
            ],
            env=env,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("webhook receiver did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
            self.process = None

    def set_mode(self, mode: str) -> None:
        """Switch the mode atomically: the receiver reads the file on every request,
        and a file caught between truncation and write reads as empty ("ok"), which
        once answered a request that should have stalled."""
        staged = self.mode_file.with_suffix(".staged")
        staged.write_text(mode)
        os.replace(staged, self.mode_file)

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def acknowledged(self, path: str | None = None) -> Counter[str]:
        """webhook-id -> how many times it was received (at ``path``), verified and
        answered 2xx in time (a stalled answer came after the sender gave up)."""
        return Counter(
            e["id"]
            for e in self.entries()
            if e["valid"]
            and 200 <= e["status"] < 300
            and e["mode"] != "stall"
            and (path is None or e["path"].endswith(path))
        )

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(e["body"]) for e in self.entries() if e["valid"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--mode-file", type=Path, required=True)
    parser.add_argument("--stall-seconds", type=float, default=3.0)
    args = parser.parse_args()
    serve(args.port, args.log, args.mode_file, args.stall_seconds, os.environ[SECRET_ENV])


if __name__ == "__main__":
    main()
