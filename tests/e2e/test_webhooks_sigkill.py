"""A `SIGKILL` of `ledger serve` in the middle of webhook deliveries, then a
restart: every delivery arrives, and only what had not been acknowledged (at
most the one request in flight) arrives twice. SQLite always, DynamoDB on the
emulator."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.settings import load_settings
from api.http.auth import mint_token
from tests.support.http_helpers import API, DIRECTORY, PROVENANCE, directory_puts, spec
from tests.support.http_server import free_port, ledger_command, wait_until_up
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.slow  # subprocess servers

SECRET = "whsec_c2lnbmluZy1rZXktZm9yLXRoZS1zaWdraWxsLXRlc3Q="
ATTEMPTS = 8


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Server:
    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.env = env
        self.log = tmp_path / "serve.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.base = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                [*ledger_command(), "serve", "--port", str(self.port)],
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        wait_until_up(self.process, f"{self.base}/healthz", self.log)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(15)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(15)


def run_life(tmp_path: Path, store_env: dict[str, str]) -> None:
    receiver = Receiver(tmp_path, SECRET).start()
    receiver.set_mode("500")  # nothing is acknowledged until the kill is near
    (tmp_path / "hooks.toml").write_text(
        f'[[webhook]]\nid = "chat"\nurl = "{receiver.url}"\nsecret = "env:HOOK_SECRET"\n'
        'events = ["attempt.succeeded", "proposal.declined"]\ntimeout_seconds = 2\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(
        {
            "LEDGER_EXECUTORS_FILE": str(tmp_path / "hooks.toml"),
            "HOOK_SECRET": SECRET,
            "PYTHONUNBUFFERED": "1",
            **store_env,
        }
    )
    server = Server(tmp_path, env)
    settings = load_settings(env="development")
    auth: dict[str, Any] = {
        role: {
            "Authorization": "Bearer "
            + mint_token(
                settings,
                subject=role,
                role=role,
                provenance=PROVENANCE if role == "channel" else None,
            )
        }
        for role in ("admin", "proposer", "channel")
    }
    expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        server.start()
        with httpx.Client(base_url=server.base, timeout=30) as http:
            for path, body in directory_puts():
                assert http.put(DIRECTORY + path, json=body, headers=auth["admin"]).is_success
            for n in range(ATTEMPTS):
                created = http.post(
                    f"{API}/proposals",
                    headers=auth["proposer"],
                    json={
                        "actor_id": "alice",
                        "spec": spec(content={"title": f"task {n}"}, expires_at=expires),
                    },
                )
                assert created.status_code == 201, created.text
                shown = http.post(
                    f"{API}/proposals/{created.json()['proposal_id']}/presentations",
                    headers=auth["proposer"],
                    json={
                        "version": 1,
                        "identity_binding_id": PROVENANCE.identity_binding_id,
                        "channel_binding_id": PROVENANCE.channel_binding_id,
                        "conversation_key": PROVENANCE.conversation_key,
                    },
                )
                approved = http.post(
                    f"{API}/approvals",
                    headers=auth["channel"],
                    json={"token": shown.json()["token"]},
                )
                assert approved.status_code == 202, approved.text

            def failing() -> int:
                page = http.get(
                    f"{API}/webhook-deliveries",
                    headers=auth["admin"],
                    params={"status": "failing", "limit": 200},
                )
                return len(page.json()["items"])

            wait_for(lambda: failing() == ATTEMPTS, 120, "every delivery to be recorded")
        receiver.set_mode("ok:3")  # three acknowledged, then one held in flight
        wait_for(
            lambda: any(e["mode"] == "stall" for e in receiver.entries()),
            120,
            "a delivery in flight after three acknowledgements",
        )
        server.kill()  # mid-delivery: acknowledged, in flight and not yet tried ones
        before = receiver.acknowledged()
        assert len(before) == 3, before

        receiver.set_mode("ok")
        server.start()
        wait_for(
            lambda: len(receiver.acknowledged()) == ATTEMPTS,
            120,
            "every delivery after the restart",
        )
        with httpx.Client(base_url=server.base, timeout=30) as http:
            wait_for(
                lambda: (
                    len(
                        http.get(
                            f"{API}/webhook-deliveries",
                            headers=auth["admin"],
                            params={"status": "delivered", "limit": 200},
                        ).json()["items"]
                    )
                    == ATTEMPTS
                ),
                60,
                "every record delivered",
            )
        after = receiver.acknowledged()
        repeated = {i: n for i, n in after.items() if n > 1}
        print(
            f"webhook SIGKILL: {ATTEMPTS} deliveries, {len(before)} acknowledged before the "
            f"kill, repeated after the restart: {sum(repeated.values()) - len(repeated)}"
        )
        assert len(repeated) <= 1 and all(n == 2 for n in repeated.values()), after
        assert all(e["valid"] for e in receiver.entries())
    finally:
        server.stop()
        receiver.stop()


def test_sigkill_mid_delivery_loses_nothing_on_sqlite(tmp_path: Path) -> None:
    run_life(
        tmp_path, {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(tmp_path / "ledger.db")}
    )


@pytest.mark.dynamodb
def test_sigkill_mid_delivery_loses_nothing_on_dynamodb(
    tmp_path: Path,
    dynamodb_endpoint: str,
    dynamodb_table_name: str,
) -> None:
    run_life(
        tmp_path,
        {
            "LEDGER_STORE": "dynamodb",
            "LEDGER_DYNAMODB_TABLE": dynamodb_table_name,
            "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint,
            "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": dynamodb_endpoint,
            "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        },
    )
