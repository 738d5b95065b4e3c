"""Real `ledger serve` processes for the client tests, on SQLite or the emulator,
with a loopback webhook receiver that checks deliveries with the client's verifier."""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from adapters.settings import load_settings
from api.http.auth import mint_token
from domain.services.approval import Provenance
from ledger_client import Client, SpecDigests, WebhookVerifier, sha256_digest
from ledger_client.errors import WebhookVerificationError
from tests.support.http_server import free_port, ledger_command, wait_until_up

ALICE = Provenance(
    actor_id="alice",
    identity_binding_id="ib-alice",
    channel_binding_id="cb-kitchen",
    conversation_key="conv-42",
)
WEBHOOK_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


# What the tests' assistant binds into its specs: digests of its own (small) things;
# the schema digest is the build's, from GET /executors.
DIGESTS = SpecDigests(
    plugin_build=sha256_digest("the client tests' assistant, build 1"),
    policy_digest=sha256_digest("tasks.write for enrolled actors, after their approval"),
)
FAKE = "fake.provider_idempotency"


def enrol(admin: Client, who: Provenance) -> None:
    """An actor who may approve tasks.write through one chat conversation."""
    admin.put_actor(who.actor_id)
    admin.put_identity_binding(
        who.identity_binding_id,
        actor_id=who.actor_id,
        channel="chat",
        external_id=f"{who.actor_id}@chat",
    )
    admin.put_channel_binding(
        who.channel_binding_id, conversation_key=who.conversation_key, channel="chat"
    )
    admin.put_grant(who.actor_id, "tasks.write")


@dataclass
class Actor:
    """A fresh actor of one test, with a channel token carrying its provenance."""

    provenance: Provenance
    channel_token: str

    @property
    def binding(self) -> dict[str, str]:
        p = self.provenance
        return {
            "identity_binding_id": p.identity_binding_id,
            "channel_binding_id": p.channel_binding_id,
            "conversation_key": p.conversation_key,
        }


def spec_args(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "permission": "tasks.write",
        "effect": "create",
        "destination": "tasks",
        "content": {"title": "Buy milk"},
        "sources": ["message:1"],
        "digests": DIGESTS,
    }
    args.update(changes)
    return args


class Receiver:
    """Webhook deliveries, each verified with ``WebhookVerifier`` as it arrives."""

    def __init__(self) -> None:
        self.verified: list[dict[str, Any]] = []
        self.refused = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        verifier = WebhookVerifier(WEBHOOK_SECRET)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    event = verifier.verify(dict(self.headers.items()), body)
                except WebhookVerificationError:
                    status = 400
                    with outer._changed:
                        outer.refused += 1
                else:
                    status = 204
                    with outer._changed:
                        outer.verified.append(event)
                        outer._changed.notify_all()
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ledger-events"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()  # a short poll: shutdown() waits for it

    def wait_for(self, attempt_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The verified delivery about ``attempt_id`` (bounded wait on the condition)."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: next((e for e in self.verified if e.get("attempt_id") == attempt_id), None),
                timeout=timeout,
            )
        assert found is not None, f"no verified webhook for {attempt_id}; refused {self.refused}"
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class LedgerServer:
    """One running `ledger serve`, its tokens and its webhook receiver."""

    store: str
    url: str
    secret: str
    process: subprocess.Popen[bytes]
    receiver: Receiver
    log: Path
    store_env: dict[str, str] = field(default_factory=dict)

    def token(self, role: str, subject: str | None = None, **claims: Any) -> str:
        settings = load_settings(auth_hs256_secret=self.secret)
        if role == "channel":
            claims.setdefault("provenance", ALICE)
        return mint_token(settings, subject=subject or f"{role}-tester", role=role, **claims)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.receiver.close()


def start_server(workdir: Path, store_env: dict[str, str], store: str) -> LedgerServer:
    """`ledger serve` on a free port with a webhook subscription to a fresh receiver."""
    receiver = Receiver()
    executors = workdir / "executors.toml"
    executors.write_text(
        "[[webhook]]\n"
        f'url = "{receiver.url}"\n'
        'secret = "env:CLIENT_TEST_WEBHOOK_SECRET"\n'
        'events = ["attempt.succeeded", "attempt.failed_safe", "attempt.outcome_unknown"]\n'
    )
    secret = secrets.token_hex(32)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "AWS_"))}
    env.update(store_env)
    env.update(
        {
            "LEDGER_AUTH_HS256_SECRET": secret,
            "LEDGER_EXECUTORS_FILE": str(executors),
            "CLIENT_TEST_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "PYTHONUNBUFFERED": "1",
        }
    )
    log = workdir / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*ledger_command(), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(process, url + "/readyz", log)
    except BaseException:
        process.kill()
        receiver.close()
        raise
    return LedgerServer(store, url, secret, process, receiver, log, store_env)


def dynamodb_env(endpoint: str, table: str) -> dict[str, str]:
    return {
        "LEDGER_STORE": "dynamodb",
        "LEDGER_DYNAMODB_TABLE": table,
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }


def log_tail(server: LedgerServer) -> str:
    try:
        return server.log.read_text(errors="replace")[-3000:]
    except OSError:
        return ""


def as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def proposal_streams(server: LedgerServer) -> int:
    """How many proposal lineages the server's store holds, counted in the store itself."""
    if server.store == "sqlite":
        import sqlite3

        path = server.store_env["LEDGER_SQLITE_PATH"]
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            (count,) = db.execute(
                "SELECT COUNT(*) FROM stored_events "
                "WHERE originator_id LIKE 'prop\\_%' ESCAPE '\\' AND originator_version = 1"
            ).fetchone()
        return int(count)
    from tests.support.dynamodb_fixtures import new_client

    client = new_client(server.store_env["AWS_ENDPOINT_URL_DYNAMODB"])
    count, start = 0, None
    while True:
        page = client.scan(
            TableName=server.store_env["LEDGER_DYNAMODB_TABLE"],
            FilterExpression="begins_with(pk, :p) AND sk = :one",
            ExpressionAttributeValues={":p": {"S": "prop_"}, ":one": {"N": "1"}},
            Select="COUNT",
            **({"ExclusiveStartKey": start} if start else {}),
        )
        count += page["Count"]
        start = page.get("LastEvaluatedKey")
        if not start:
            return count
