"""A reference task provider on loopback that honours the IETF Idempotency-Key draft.

Run it as a real process: ``python -m tests.support.provider --port N``.

- ``POST|PUT|PATCH /v1/<anything>`` with an ``Idempotency-Key`` header creates a
  task (the *effect*) and answers 201 with ``{"id", "status", "key_hash"}``. The
  same key with the same body gets the stored first answer again (no new
  effect); the same key with a different body gets 422; a request while another
  with the same key is in flight gets 409. No key: 400.
- ``GET /v1/by-key/<key>``: 200 with the stored answer, or 404 (no effect).
- ``GET /_effects``: the per-key effect, request and unauthorized-write counters,
  and the answers held per hold name, for tests.
- ``POST /_release`` with ``{"hold": name}``: answer every request held under
  that name, and hold no later one (see ``held_answer``).
- ``GET /_health``.
- When ``--token-env NAME`` is given, every ``/v1`` request needs
  ``Authorization: Bearer <value of NAME>`` (401 otherwise, no effect).

Faults are switched per request by the JSON body: ``"fault"`` is one of
``error_5xx`` (503 before the effect), ``drop_after_effect`` (apply, then close
the connection without an answer), ``late_answer`` (apply, then answer after
``"delay"`` seconds, default 3), ``reject_4xx`` (400, no effect), ``conflict_409``,
``throttle_429`` (no effect), ``not_json`` (apply, answer 201 with text),
``huge_answer`` (apply, answer 201 with ``"size_mb"`` MB of JSON, default 50),
``held_answer`` (apply, then hold the answer until a test releases ``"hold"``
with ``POST /_release``, at most ``"delay"`` seconds, default 120),
``hang`` (no effect, answer nothing for ``"delay"`` seconds), ``apply_late``
(apply ``"delay"`` seconds after the request arrived, whoever still listens:
a provider that goes on working after its client gave up), ``trickle`` (apply,
send the headers, then the body one byte at a time over ``"delay"`` seconds),
``echo_auth`` (apply, answer with the request's Authorization value as
``status``), ``drop_then_reject`` (apply, close the connection without an
answer; from then on every write with that key is refused with
``"reject_status"``, default 401: a credential rotated or a key the provider
will not accept again, 422 answering as for a reused key). A fault fires for
the first ``"fault_times"`` requests of its key (default 1); later requests
with that key are served normally. A ``"delay"`` may be a decimal string (a
spec's content holds integers only).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

MAX_BODY = 1024 * 1024
REFUSALS = {401: "unauthorized", 422: "idempotency_key_reused_with_another_body"}


class ProviderState:
    """Keys, stored answers and counters (one lock)."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self.lock = threading.Lock()
        self.answers: dict[str, tuple[int, bytes, str]] = {}  # key -> status, body, fingerprint
        self.in_flight: set[str] = set()
        self.effects: dict[str, int] = {}
        self.requests: dict[str, int] = {}
        self.unauthorized: dict[str, int] = {}  # writes refused for their credential, by key
        self.faults_fired: dict[str, int] = {}
        self.refusals: dict[str, int] = {}  # key -> the status every later write gets
        self.lookups = 0
        self.next_id = 0
        self.connections: set[tuple[str, int]] = set()
        self.paths: list[str] = []
        self.holds: dict[str, threading.Event] = {}  # hold name -> set once released
        self.held: dict[str, int] = {}  # hold name -> answers waiting for it now

    def hold(self, name: str) -> threading.Event:
        with self.lock:
            return self.holds.setdefault(name, threading.Event())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client reuses connections
    server: ProviderServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    # -- helpers ---------------------------------------------------------------

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self) -> bool:
        token = self.server.state.token
        return token is None or self.headers.get("Authorization") == f"Bearer {token}"

    # -- routes ------------------------------------------------------------------

    def do_GET(self) -> None:
        state = self.server.state
        if self.path == "/_health":
            self._send(200, {"ok": True})
        elif self.path == "/_effects":
            with state.lock:
                self._send(
                    200,
                    {
                        "effects": state.effects,
                        "requests": state.requests,
                        "unauthorized": state.unauthorized,
                        "lookups": state.lookups,
                        "paths": state.paths,
                        "connections": len(state.connections),
                        "in_flight": sorted(state.in_flight),
                        "held": state.held,
                    },
                )
        elif self.path.startswith("/v1/by-key/"):
            if not self._authorized():
                self._send(401, {"error": "unauthorized"})
                return
            key = unquote(self.path[len("/v1/by-key/") :])
            with state.lock:
                state.lookups += 1
                found = state.answers.get(key)
            if found is None:
                self._send(404, {"error": "not_found"})
            else:
                self._send(200, found[1])
        else:
            self._send(404, {"error": "no_route"})

    def do_POST(self) -> None:
        if self.path == "/_release":
            self._release()
            return
        self._write()

    def _release(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            name = json.loads(self.rfile.read(length) or b"{}").get("hold")
        except (ValueError, AttributeError):
            name = None
        if not isinstance(name, str):
            self._send(400, {"error": "hold_missing"})
            return
        self.server.state.hold(name).set()
        self._send(200, {"released": name})

    def do_PUT(self) -> None:
        self._write()

    def do_PATCH(self) -> None:
        self._write()

    def _write(self) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send(413, {"error": "too_large"})
            return
        raw = self.rfile.read(length)
        if len(raw) < length:
            # The client went away before its whole body arrived (a process killed
            # between the headers and the body): like any HTTP server, no request
            # was made, so nothing is applied (an empty body must not become one).
            self._drop()
            return
        with state.lock:
            state.connections.add(self.client_address)
            state.paths.append(self.path)
        if not self.path.startswith("/v1/"):
            self._send(404, {"error": "no_route"})
            return
        key = self.headers.get("Idempotency-Key")
        if not self._authorized():
            if key:
                with state.lock:
                    state.unauthorized[key] = state.unauthorized.get(key, 0) + 1
            self._send(401, {"error": "unauthorized"})
            return
        if not key:
            self._send(400, {"error": "idempotency_key_missing"})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, {"error": "not_json"})
            return
        fingerprint = hashlib.sha256(self.command.encode() + self.path.encode() + raw).hexdigest()
        with state.lock:
            state.requests[key] = state.requests.get(key, 0) + 1
            stored = state.answers.get(key)
            refusal = state.refusals.get(key)
            if refusal is not None:
                verdict = "refused"
            elif key in state.in_flight:
                verdict = "in_flight"
            elif stored is not None:
                verdict = "stored"
            else:
                verdict = "new"
                state.in_flight.add(key)
        if refusal is not None:
            self._send(refusal, {"error": REFUSALS.get(refusal, "rejected")})
            return
        if verdict == "in_flight":
            self._send(409, {"error": "request_in_progress"})
            return
        if stored is not None and verdict == "stored":
            status, answer, stored_fingerprint = stored
            if stored_fingerprint != fingerprint:
                self._send(422, {"error": "idempotency_key_reused_with_another_body"})
            else:
                self._send(status, answer)  # the stored first answer
            return
        try:
            self._apply(key, body, fingerprint)
        finally:
            with state.lock:
                state.in_flight.discard(key)

    def _fault(self, key: str, body: dict[str, Any]) -> str | None:
        fault = body.get("fault") if isinstance(body, dict) else None
        if not isinstance(fault, str):
            return None
        times = body.get("fault_times", 1)
        state = self.server.state
        with state.lock:
            fired = state.faults_fired.get(key, 0)
            if fired >= times:
                return None
            state.faults_fired[key] = fired + 1
        return fault

    def _apply(self, key: str, body: dict[str, Any], fingerprint: str) -> None:
        state = self.server.state
        fault = self._fault(key, body)
        # a number, or a decimal as a string (a ledger spec's content holds integers only)
        delay = float(body.get("delay", 3)) if isinstance(body, dict) else 3.0
        if fault == "error_5xx":
            self._send(503, {"error": "unavailable"})
            return
        if fault == "reject_4xx":
            self._send(400, {"error": "rejected"})
            return
        if fault == "conflict_409":
            self._send(409, {"error": "conflict"})
            return
        if fault == "throttle_429":
            self._send(429, {"error": "slow_down"})
            return
        if fault == "hang":
            time.sleep(delay)
            self._drop()
            return
        if fault == "apply_late":
            # Keeps working after the client gave up: applies ``delay`` seconds after
            # it received the request, then answers a connection nobody reads.
            time.sleep(delay)
        with state.lock:
            state.next_id += 1
            state.effects[key] = state.effects.get(key, 0) + 1
            answer = {
                "id": f"task_{state.next_id}",
                "status": "created",
                "key_hash": hashlib.sha256(key.encode()).hexdigest()[:16],
            }
            encoded = json.dumps(answer).encode()
            state.answers[key] = (201, encoded, fingerprint)
            if fault == "drop_then_reject":
                state.refusals[key] = int(body.get("reject_status", 401))
        if fault in ("drop_after_effect", "drop_then_reject"):
            self._drop()
        elif fault == "late_answer":
            time.sleep(delay)
            self._send(201, encoded)
        elif fault == "held_answer":
            self._hold(str(body.get("hold", "")), float(body.get("delay", 120)))
            with contextlib.suppress(OSError):  # the client may be gone (killed)
                self._send(201, encoded)
        elif fault == "apply_late":
            with contextlib.suppress(OSError):
                self._send(201, encoded)
        elif fault == "not_json":
            self._send(201, b"created, thanks", "text/plain")
        elif fault == "echo_auth":  # a careless provider echoing our credential
            self._send(201, {**answer, "status": self.headers.get("Authorization", "")})
        elif fault == "trickle":
            self._trickle(encoded, delay)
        elif fault == "huge_answer":
            self._send_huge(int(body.get("size_mb", 50)))
        else:
            self._send(201, encoded)

    def _hold(self, name: str, seconds: float) -> None:
        """Wait until ``name`` is released (at most ``seconds``), counted in ``held``."""
        state = self.server.state
        released = state.hold(name)
        with state.lock:
            state.held[name] = state.held.get(name, 0) + 1
        try:
            released.wait(seconds)
        finally:
            with state.lock:
                state.held[name] -= 1

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _trickle(self, body: bytes, seconds: float) -> None:
        """Headers at once, then the body one byte at a time over ``seconds``."""
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for i in range(len(body)):
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                time.sleep(seconds / len(body))
        except OSError:
            self.close_connection = True

    def _send_huge(self, megabytes: int) -> None:
        size = megabytes * 1024 * 1024
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        chunk = b" " * 65536
        sent = 0
        try:
            while sent < size:
                piece = chunk[: min(len(chunk), size - sent)]
                self.wfile.write(piece)
                sent += len(piece)
        except OSError:
            self.close_connection = True  # the client stopped reading: as it should


class ProviderServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, token: str | None) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.state = ProviderState(token)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--token-env", help="require Authorization: Bearer <value of this environment variable>"
    )
    args = parser.parse_args(argv)
    token = os.environ[args.token_env] if args.token_env else None
    server = ProviderServer(args.port, token)
    print(f"provider on http://127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
