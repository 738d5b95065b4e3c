"""`SIGTERM` to a real `ledger serve` while 8 executor calls are in flight at a
slow provider (it applies the effect, then holds its answer until the test,
having seen the signal taken, releases it): the process leases nothing more,
waits for the 8 answers, records the 8 results and exits 0, so none is left
to recovery (each key was sent once, nothing is due); a long poll in flight
at the signal is answered with the result. A second signal exits at once
(128 + 15); the calls it cut off are recovery's, as after `SIGKILL`, and a
restart settles them with one effect per key.
SQLite always, DynamoDB on the emulator."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.settings import load_settings
from adapters.store import LedgerStore
from api.http.auth import mint_token
from domain.attempt import ExecutionAttempt
from tests.support.http_executors import TOKEN_VARIABLE, executors_toml, load_http
from tests.support.http_helpers import API, DIRECTORY, PROVENANCE, directory_puts, spec
from tests.support.http_server import free_port, ledger_command, wait_until_up
from tests.support.provider_fixtures import Provider

pytestmark = pytest.mark.slow  # subprocess servers and a provider that answers late

CALLS = 8
CAPABILITY = "tasks.create"
# The provider holds every answer until the test releases it: a call's deadline is
# its lease less 2 s, so a lease long enough that no held call runs out of time,
# however long the approvals take on a loaded machine (recovery needs none to lapse).
HELD_LEASE_SECONDS = 60
# The second signal's run leaves the calls to recovery, which re-sends once their
# leases lapse: short leases, and all 8 queued before the worker starts, so the 8
# calls are leased together and are at the provider long before their deadline.
LAPSING_LEASE_SECONDS = 10


def wait_for(
    condition: Callable[[], bool], seconds: float, what: str, seen: Callable[[], object]
) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {seconds:g} s waiting for {what}; seen: {seen()}")


class Life:
    """One ledger serve on a store, the provider it calls, and the attempts approved.

    Every call's answer is held at the provider under ``hold`` until ``release``."""

    def __init__(
        self,
        tmp_path: Path,
        provider: Provider,
        store_env: dict[str, str],
        lease_seconds: int = HELD_LEASE_SECONDS,
    ) -> None:
        self.tmp_path = tmp_path
        self.provider = provider
        self.hold = f"graceful-{uuid.uuid4().hex}"
        text = executors_toml(provider.url, timeout=lease_seconds)
        loaded = load_http(tmp_path, text, provider.token)
        self.digest = next(
            e.build_digest for e in loaded.registry.entries() if e.capability == CAPABILITY
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        env.update(
            {
                "LEDGER_EXECUTORS_FILE": str(tmp_path / "executors.toml"),
                TOKEN_VARIABLE: f"Bearer {provider.token}",
                "LEDGER_FAKE_EXECUTORS": "false",
                "LEDGER_WORKER_CONCURRENCY": str(CALLS),
                "LEDGER_WORKER_CONCURRENCY_PER_BUILD": str(CALLS),
                "LEDGER_SHUTDOWN_GRACE_SECONDS": "60",
                "LEDGER_LEASE_SECONDS": str(lease_seconds),
                "LEDGER_RECOVERY_INTERVAL_SECONDS": "1",
                "PYTHONUNBUFFERED": "1",
                **store_env,
            }
        )
        self.env = env
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "serve.log"
        self.process: subprocess.Popen[bytes] | None = None
        settings = load_settings(env="development")
        self.auth: dict[str, dict[str, str]] = {
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
        self.keys: dict[str, str] = {}  # attempt id -> idempotency key

    def start(self, *flags: str) -> None:
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                [*ledger_command(), "serve", "--port", str(self.port), *flags],
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        wait_until_up(self.process, f"{self.base}/healthz", self.log)

    def start_worker(self) -> subprocess.Popen[bytes]:
        """``ledger worker`` on the same store (its output in ``worker.log``)."""
        with (self.tmp_path / "worker.log").open("ab") as sink:
            return subprocess.Popen(
                [*ledger_command(), "worker"], env=self.env, stdout=sink, stderr=subprocess.STDOUT
            )

    def approve(self, count: int) -> list[str]:
        expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        attempts = []
        with httpx.Client(base_url=self.base, timeout=30) as http:
            puts = [
                *directory_puts(),
                (
                    f"/executor-builds/{CAPABILITY}/{self.digest}",
                    {"delivery_mode": "provider_idempotency", "available": True},
                ),
            ]
            for path, body in puts:
                assert http.put(DIRECTORY + path, json=body, headers=self.auth["admin"]).is_success
            for n in range(count):
                content = {"title": f"task {n}", "fault": "held_answer", "hold": self.hold}
                created = http.post(
                    f"{API}/proposals",
                    headers=self.auth["proposer"],
                    json={
                        "actor_id": PROVENANCE.actor_id,
                        "spec": spec(
                            CAPABILITY,
                            executor_build=self.digest,
                            content=content,
                            expires_at=expires,
                        ),
                    },
                )
                assert created.status_code == 201, created.text
                shown = http.post(
                    f"{API}/proposals/{created.json()['proposal_id']}/presentations",
                    headers=self.auth["proposer"],
                    json={
                        "version": 1,
                        "identity_binding_id": PROVENANCE.identity_binding_id,
                        "channel_binding_id": PROVENANCE.channel_binding_id,
                        "conversation_key": PROVENANCE.conversation_key,
                    },
                )
                approved = http.post(
                    f"{API}/approvals",
                    headers=self.auth["channel"],
                    json={"token": shown.json()["token"]},
                )
                assert approved.status_code == 202, approved.text
                attempts.append(approved.json()["attempt_id"])
        return attempts

    def wait_held(self, count: int) -> None:
        """Until ``count`` calls are at the provider, their answers held."""
        wait_for(
            lambda: self.provider.held(self.hold) >= count,
            90,
            f"{count} calls held at the provider",
            lambda: f"{self.provider.held(self.hold)} held; log:\n{self.log.read_text()[-3000:]}",
        )

    def release(self) -> None:
        self.provider.release(self.hold)

    def long_poll(
        self, attempt_id: str, wait: int
    ) -> tuple[threading.Thread, list[httpx.Response]]:
        """A `?wait=` request on a thread of its own, sent now; its answer lands in
        the list once the server gives it."""
        answers: list[httpx.Response] = []
        poll = threading.Thread(
            target=lambda: answers.append(
                httpx.get(
                    f"{self.base}{API}/execution-attempts/{attempt_id}",
                    params={"wait": wait},
                    headers=self.auth["admin"],
                    timeout=60,
                )
            )
        )
        poll.start()
        time.sleep(1)  # sequencing only: let the request reach the server first
        return poll, answers

    def stop_gracefully(self) -> tuple[int, float]:
        """SIGTERM; once the process says it is stopping, release the held answers.
        The exit status and how long the process took to exit after the signal."""
        assert self.process is not None
        log = self.log
        before = len(log.read_text())  # the log of this run only (a restart appends)
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        wait_for(
            lambda: "SIGTERM: stopping" in log.read_text()[before:],
            60,
            "the server to take the signal",
            lambda: log.read_text()[-3000:],
        )
        self.release()
        status = self.process.wait(90)
        return status, time.monotonic() - began

    def signal(self, *numbers: signal.Signals) -> tuple[int, float]:
        """Send the signals (a short pause between them); the exit status and how
        long the process took to exit after the first."""
        assert self.process is not None
        began = time.monotonic()
        for index, number in enumerate(numbers):
            if index:
                time.sleep(0.3)
            self.process.send_signal(number)
        status = self.process.wait(90)
        return status, time.monotonic() - began

    def stop(self) -> None:
        self.release()  # whatever happened, no provider thread waits on
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(15)


def statuses(store: LedgerStore, attempt_ids: list[str]) -> list[str]:
    found = []
    for attempt_id in attempt_ids:
        attempt = store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None
        found.append(attempt.status.value)
    return found


def keys_of(store: LedgerStore, attempt_ids: list[str]) -> list[str]:
    keys = []
    for attempt_id in attempt_ids:
        attempt = store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None
        keys.append(attempt.idempotency_key)
    return keys


def graceful(life: Life, store: Callable[[], LedgerStore]) -> None:
    life.start()
    try:
        attempts = life.approve(CALLS)
        keys = keys_of(store(), attempts)
        life.wait_held(CALLS)
        assert statuses(store(), attempts) == ["executing"] * CALLS  # none answered yet
        # a request in flight at the signal: a long poll on one of the attempts
        poll, answers = life.long_poll(attempts[0], 25)
        status, took = life.stop_gracefully()
        poll.join(60)
    finally:
        life.stop()
    # the server finished the request in flight, with the result recorded meanwhile
    assert [a.status_code for a in answers] == [200]
    assert answers[0].json()["status"] == "succeeded"
    out = life.log.read_text()
    print(
        f"graceful stop: {CALLS} calls in flight at SIGTERM, exit {status} after {took:.1f} s "
        "(the answers released once the signal was taken)"
    )
    assert status == 0, out
    assert "every attempt in flight was recorded" in out
    found = store()
    assert statuses(found, attempts) == ["succeeded"] * CALLS
    # nothing left to recovery: each key was sent once and nothing is due
    requested, effects = life.provider.requests(), life.provider.effects()
    assert [requested[k] for k in keys] == [1] * CALLS
    assert [effects[k] for k in keys] == [1] * CALLS
    due = found.due_work(datetime.now(UTC) + timedelta(days=1), 100, None)
    assert not {item.attempt_id for item in due.items} & set(attempts)


def at_once(life: Life, store: Callable[[], LedgerStore]) -> None:
    life.start("--no-worker")  # queue the 8 first: the worker then leases them together
    try:
        attempts = life.approve(CALLS)
        keys = keys_of(store(), attempts)
        assert life.signal(signal.SIGTERM)[0] == 0
        life.start()
        life.wait_held(CALLS)
        status, took = life.signal(signal.SIGTERM, signal.SIGTERM)
        # cut off before any answer came back: left to recovery, as after SIGKILL
        assert statuses(store(), attempts) == ["executing"] * CALLS
        life.release()  # the provider answers sockets nobody reads; re-sends get its answer
        print(f"second signal: exit {status} after {took:.1f} s, {CALLS} calls left to recovery")
        assert status == 128 + signal.SIGTERM
        assert "stopping at once" in life.log.read_text()
        life.start()  # recovery re-sends each with its key once the leases lapse
        wait_for(
            lambda: statuses(store(), attempts) == ["succeeded"] * CALLS,
            90,
            "recovery to settle every attempt",
            lambda: statuses(store(), attempts),
        )
        effects = life.provider.effects()
        assert [effects[k] for k in keys] == [1] * CALLS
        assert life.signal(signal.SIGTERM)[0] == 0
    finally:
        life.stop()


def test_ledger_worker_also_records_its_calls_in_flight_before_exit(
    tmp_path: Path, provider: Provider
) -> None:
    """The API alone in one process, the worker in another: SIGTERM to the worker."""
    life, store = sqlite_life(tmp_path, provider)
    life.start("--no-worker")
    worker = life.start_worker()
    try:
        attempts = life.approve(2)
        keys = keys_of(store(), attempts)
        life.wait_held(2)
        worker.send_signal(signal.SIGTERM)
        log = tmp_path / "worker.log"
        wait_for(
            lambda: "SIGTERM: stopping" in log.read_text(),
            60,
            "the worker to take the signal",
            lambda: log.read_text()[-3000:],
        )
        life.release()
        assert worker.wait(60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(15)
        life.stop()
    assert "every attempt in flight was recorded" in (tmp_path / "worker.log").read_text()
    assert statuses(store(), attempts) == ["succeeded"] * 2
    assert [life.provider.requests()[k] for k in keys] == [1, 1]


def sqlite_life(
    tmp_path: Path, provider: Provider, lease_seconds: int = HELD_LEASE_SECONDS
) -> tuple[Life, Callable[[], LedgerStore]]:
    from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore

    path = tmp_path / "ledger.db"
    store_env = {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(path)}
    life = Life(tmp_path, provider, store_env, lease_seconds)

    def store() -> LedgerStore:
        recorder = SQLiteLedgerRecorder(open_datastore(str(path)))
        recorder.create_table()
        return LedgerStore(recorder)

    return life, store


def dynamodb_life(
    tmp_path: Path,
    provider: Provider,
    endpoint: str,
    table: str,
    recorder: Any,
    lease_seconds: int = HELD_LEASE_SECONDS,
) -> tuple[Life, Callable[[], LedgerStore]]:
    env = {
        "LEDGER_STORE": "dynamodb",
        "LEDGER_DYNAMODB_TABLE": table,
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": endpoint,
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    return Life(tmp_path, provider, env, lease_seconds), lambda: LedgerStore(recorder)


def test_sigterm_records_every_call_in_flight_before_exit_on_sqlite(
    tmp_path: Path, provider: Provider
) -> None:
    graceful(*sqlite_life(tmp_path, provider))


def test_a_second_signal_exits_at_once_and_recovery_settles_the_rest_on_sqlite(
    tmp_path: Path, provider: Provider
) -> None:
    at_once(*sqlite_life(tmp_path, provider, LAPSING_LEASE_SECONDS))


@pytest.mark.dynamodb
def test_sigterm_records_every_call_in_flight_before_exit_on_dynamodb(
    tmp_path: Path,
    provider: Provider,
    dynamodb_endpoint: str,
    dynamodb_table_name: str,
    dynamodb_recorder: Any,
) -> None:
    graceful(
        *dynamodb_life(
            tmp_path, provider, dynamodb_endpoint, dynamodb_table_name, dynamodb_recorder
        )
    )


@pytest.mark.dynamodb
def test_a_second_signal_exits_at_once_and_recovery_settles_the_rest_on_dynamodb(
    tmp_path: Path,
    provider: Provider,
    dynamodb_endpoint: str,
    dynamodb_table_name: str,
    dynamodb_recorder: Any,
) -> None:
    at_once(
        *dynamodb_life(
            tmp_path,
            provider,
            dynamodb_endpoint,
            dynamodb_table_name,
            dynamodb_recorder,
            LAPSING_LEASE_SECONDS,
        )
    )


def test_a_long_poll_open_at_sigterm_is_answered_at_once(
    tmp_path: Path, provider: Provider
) -> None:
    """A `?wait=` long poll does not hold a graceful stop: once the worker has
    recorded its calls, every wait answers what its row says now. The grace (5 s)
    is shorter than the wait (30 s): a stop that let the poll wait on would cut it
    off at the grace, unanswered. Store-independent (the waits are this process's):
    run on SQLite."""
    life, _ = sqlite_life(tmp_path, provider)
    life.env["LEDGER_SHUTDOWN_GRACE_SECONDS"] = "5"
    life.start("--no-worker")  # the attempt stays queued: the poll would wait it out
    try:
        (attempt,) = life.approve(1)
        poll, answers = life.long_poll(attempt, 30)
        status, _ = life.signal(signal.SIGTERM)
        poll.join(60)
    finally:
        life.stop()
    assert status == 0, life.log.read_text()[-3000:]
    assert [a.status_code for a in answers] == [200]
    assert answers[0].json()["status"] == "queued"
