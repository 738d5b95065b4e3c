"""The restart scenarios of the status projection, over real processes.

One scenario: ``ledger serve`` with execution off takes approvals (status
``queued``), is stopped (gracefully or with SIGKILL), another process writes
while it is down (``ledger recover --once``, ``ledger worker``, or a second
``ledger serve`` with execution on), and the first server starts again. Then
every status view is compared with a fresh rebuild (``adapters.rebuild``,
write nothing) before anything reads it, and over HTTP every status and the
``succeeded`` list are checked.

    python -m tests.support.restart --store sqlite          # print the matrix
    python -m tests.support.restart --kills 10              # SIGKILL under load
    python -m tests.support.restart --code-dir DIR ...      # servers run DIR's code

``--code-dir`` runs the server processes from another checkout (for the
before/after figures); only this harness and the rebuild check run from here.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import Settings, load_settings
from domain.attempt import ExecutionAttempt
from tests.support.http_approvals import API, approve_one, headers, set_up_directory

STOPS = ("graceful", "sigkill")
WRITERS = ("recover_once", "worker", "second_serve")
START_SECONDS = 60.0
SETTLE_SECONDS = 60.0
TERMINAL = {"succeeded", "failed_safe", "outcome_unknown", "manually_resolved"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class StoreUnderTest:
    """Where the processes keep their data, and how this process opens it."""

    kind: str
    env: dict[str, str]
    settings: Settings
    dynamodb_client: Any = None

    @classmethod
    def sqlite(cls, folder: Path) -> StoreUnderTest:
        path = str(folder / "ledger.db")
        return cls(
            "sqlite",
            {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": path},
            load_settings(store="sqlite", sqlite_path=path),
        )

    @classmethod
    def dynamodb(cls, endpoint: str, table: str, client: Any) -> StoreUnderTest:
        env = {
            "LEDGER_STORE": "dynamodb",
            "LEDGER_DYNAMODB_TABLE": table,
            "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
            "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
        return cls(
            "dynamodb",
            env,
            load_settings(store="dynamodb", dynamodb_table=table),
            dynamodb_client=client,
        )

    @contextmanager
    def ledger(self) -> Iterator[Ledger]:
        wired = build_ledger(self.settings, dynamodb_client=self.dynamodb_client)
        try:
            yield wired
        finally:
            if self.dynamodb_client is None:
                wired.close()


@dataclass
class Process:
    """A ``ledger`` command running in the background, stopped by its pid."""

    popen: subprocess.Popen[bytes]
    log: Path
    base: str = ""

    def stop(self, how: str = "graceful") -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL if how == "sigkill" else signal.SIGTERM)
        try:
            self.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=5)


@dataclass
class Result:
    """What one scenario found."""

    store: str
    stop: str
    writer: str
    attempts: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # views != rebuild, before any read
    wrong_reads: list[str] = field(default_factory=list)  # HTTP answers != rebuild
    missing_from_list: list[str] = field(default_factory=list)
    caught_up: bool = False  # /readyz reported the projector caught up


class Harness:
    """Starts the processes of one scenario in ``workdir``."""

    def __init__(self, store: StoreUnderTest, workdir: Path, code_dir: Path | None = None) -> None:
        self.store = store
        self.workdir = workdir
        self.code_dir = code_dir
        self.processes: list[Process] = []
        self.count = 0
        self.extra_env: dict[str, str] = {}

    def env(self, *, execution: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "AWS_"))}
        env.update(self.store.env)
        env.update(
            {
                "LEDGER_EXECUTION_ENABLED": "true" if execution else "false",
                "LEDGER_RECOVERY_INTERVAL_SECONDS": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        if self.code_dir is not None:
            env["PYTHONPATH"] = str(self.code_dir)
        return env

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-c", "from api.cli import main; main()", *args]

    def start(self, *args: str, execution: bool) -> Process:
        self.count += 1
        log = self.workdir / f"process-{self.count}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                self.command(*args),
                cwd=self.code_dir or self.workdir,
                env=self.env(execution=execution),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        process = Process(popen, log)
        self.processes.append(process)
        return process

    def serve(self, *, execution: bool) -> Process:
        port = free_port()
        process = self.start(
            "serve", "--host", "127.0.0.1", "--port", str(port), execution=execution
        )
        process.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if process.popen.poll() is not None:
                raise AssertionError(f"ledger serve exited:\n{process.log.read_text()}")
            try:
                if httpx.get(process.base + "/healthz", timeout=1).status_code == 200:
                    return process
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError("ledger serve did not answer in time")

    def run(self, *args: str, execution: bool) -> str:
        done = subprocess.run(
            self.command(*args),
            cwd=self.code_dir or self.workdir,
            env=self.env(execution=execution),
            capture_output=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"ledger {' '.join(args)} failed: {done.stderr.decode()}")
        return done.stdout.decode()

    def close(self) -> None:
        for process in self.processes:
            process.stop("sigkill")


def approve(base: str, count: int) -> list[str]:
    """Directory set-up, then ``count`` proposals presented and approved over HTTP."""
    with httpx.Client(base_url=base, timeout=30) as client:
        set_up_directory(client)
        return [approve_one(client, n) for n in range(count)]


def wait_settled(
    store: StoreUnderTest, attempts: list[str], also: frozenset[str] | set[str] = frozenset()
) -> None:
    """Until every attempt is terminal in the log (bounded)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    done = TERMINAL | set(also)
    with store.ledger() as ledger:
        while time.monotonic() < deadline:
            states = [ledger.store.get(ExecutionAttempt, a) for a in attempts]
            if all(s is not None and s.status.value in done for s in states):
                return
            time.sleep(0.2)
    raise AssertionError("the writer did not settle every attempt in time")


def wait_caught_up(base: str, *, fallback_seconds: float) -> bool:
    """Until /readyz says the status projector is caught up; a server without lag
    details (older code) gets ``fallback_seconds`` instead. True when it said so."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        body = httpx.get(base + "/readyz", timeout=5).json()
        details = body.get("details")
        if details is None:
            time.sleep(fallback_seconds)
            return False
        lag = details.get("projections", {}).get("status")
        if lag and lag["events_behind"] == 0 and lag["exact"]:
            return True
        time.sleep(0.1)
    raise AssertionError("the status projector did not catch up in time")


def scenario(
    harness: Harness, stop: str, writer: str, *, count: int = 4, fallback_seconds: float = 3.0
) -> Result:
    """One cell of the matrix (see the module docstring)."""
    from adapters.rebuild import canonical, rebuild
    from api.http.schemas.attempts import AttemptOut
    from projections.status import public_view, status_record

    result = Result(harness.store.kind, stop, writer)
    first = harness.serve(execution=False)
    result.attempts = approve(first.base, count)
    for attempt_id in result.attempts:  # read-your-writes: queued, never a 404
        answer = httpx.get(
            f"{first.base}{API}/execution-attempts/{attempt_id}",
            headers=headers("admin", subject="root"),
            timeout=10,
        )
        assert answer.status_code == 200 and answer.json()["status"] == "queued", answer.text
    first.stop(stop)

    if writer == "recover_once":
        harness.run("recover", "--once", execution=True)
    elif writer == "worker":
        other = harness.start("worker", execution=True)
        wait_settled(harness.store, result.attempts)
        other.stop("graceful")
    else:
        other = harness.serve(execution=True)
        wait_settled(harness.store, result.attempts)
        other.stop("graceful")
    wait_settled(harness.store, result.attempts)

    again = harness.serve(execution=False)
    result.caught_up = wait_caught_up(again.base, fallback_seconds=fallback_seconds)
    with harness.store.ledger() as ledger:
        result.stale = rebuild(ledger, "status", write=False).changed
        expected = {
            a: status_record(ledger.store.get(ExecutionAttempt, a))  # type: ignore[arg-type]
            for a in result.attempts
        }
        for attempt_id, record in expected.items():
            live = ledger.views.get_view(record.name, record.key)  # type: ignore[union-attr]
            if canonical(live) != canonical(record) and attempt_id not in result.stale:
                result.stale.append(attempt_id)
    admin = headers("admin", subject="root")
    with httpx.Client(base_url=again.base + API, timeout=10, headers=admin) as client:
        for attempt_id, record in expected.items():
            answer = client.get(f"/execution-attempts/{attempt_id}")
            want = AttemptOut.model_validate(public_view(record.data)).model_dump(mode="json")
            if answer.status_code != 200 or answer.json() != want:
                result.wrong_reads.append(attempt_id)
        listed = client.get("/execution-attempts", params={"status": "succeeded", "limit": 200})
        ids = {item["attempt_id"] for item in listed.json()["items"]}
        result.missing_from_list = [a for a in result.attempts if a not in ids]
    again.stop("graceful")
    return result


def killed_under_load(harness: Harness, *, kills: int = 5, seed: int = 12) -> Result:
    """SIGKILL a working server (execution on) at a random moment while a client
    keeps approving, ``kills`` times; then start it once more and let it settle:
    every view must equal a rebuild. Leases are short so recovery finishes what
    a kill cut off."""
    import random
    import threading

    from adapters.rebuild import rebuild

    rng = random.Random(seed)
    harness.extra_env["LEDGER_LEASE_SECONDS"] = "5"
    result = Result(harness.store.kind, "sigkill_under_load", f"{kills} kills")
    numbers = iter(range(1_000_000))
    for round_number in range(kills):
        server = harness.serve(execution=True)
        stop = threading.Event()

        def load(
            base: str = server.base, first: bool = round_number == 0, stop: threading.Event = stop
        ) -> None:
            try:
                with httpx.Client(base_url=base, timeout=30) as client:
                    if first:
                        set_up_directory(client)
                    while not stop.is_set():
                        result.attempts.append(approve_one(client, next(numbers)))
            except (httpx.HTTPError, AssertionError):
                return  # the server was killed under this request

        loader = threading.Thread(target=load)
        loader.start()
        stop.wait(rng.uniform(0.5, 2.5))  # when to kill: the load's shape, not an assertion
        server.stop("sigkill")
        stop.set()
        loader.join(timeout=60)
    final = harness.serve(execution=True)
    with harness.store.ledger() as ledger:
        everything = list(ledger.backend.attempt_ids())  # type: ignore[union-attr]
    wait_settled(harness.store, everything, also={"outcome_unknown"})
    result.caught_up = wait_caught_up(final.base, fallback_seconds=3.0)
    with harness.store.ledger() as ledger:
        result.attempts = everything
        result.stale = rebuild(ledger, "status", write=False).changed
    final.stop("graceful")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=["sqlite", "dynamodb"], default="sqlite")
    parser.add_argument("--code-dir", type=Path, default=None)
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument(
        "--kills",
        type=int,
        default=0,
        help="instead of the matrix: SIGKILL a working server this many times",
    )
    args = parser.parse_args()
    rows: list[Result] = []
    node: Any = None
    endpoint = ""
    if args.store == "dynamodb":
        from tests.support import ministack

        node = ministack.start()
        endpoint = node.url
    print(
        "| store | stopped by | written while down by | attempts | stale views | "
        "wrong status reads | missing from list |\n|---|---|---|---|---|---|---|",
        flush=True,
    )
    try:
        if args.kills:
            with tempfile.TemporaryDirectory() as folder:
                store = _store(args.store, Path(folder), endpoint)
                harness = Harness(store, Path(folder), args.code_dir)
                try:
                    found = killed_under_load(harness, kills=args.kills)
                finally:
                    harness.close()
            print(
                f"| {found.store} | {found.stop} | {found.writer} | {len(found.attempts)} | "
                f"{len(found.stale)} | - | - |",
                flush=True,
            )
            return
        for stop in STOPS:
            for writer in WRITERS:
                with tempfile.TemporaryDirectory() as folder:
                    store = _store(args.store, Path(folder), endpoint)
                    harness = Harness(store, Path(folder), args.code_dir)
                    try:
                        rows.append(scenario(harness, stop, writer, count=args.attempts))
                    finally:
                        harness.close()
                last = rows[-1]
                print(
                    f"| {last.store} | {stop} | {writer} | {len(last.attempts)} | "
                    f"{len(last.stale)} | {len(last.wrong_reads)} | "
                    f"{len(last.missing_from_list)} |",
                    flush=True,
                )
    finally:
        if node is not None:
            node.stop()


def _store(kind: str, folder: Path, endpoint: str) -> StoreUnderTest:
    if kind == "sqlite":
        return StoreUnderTest.sqlite(folder)
    import uuid

    from adapters.dynamodb.schema import create_table
    from tests.support.dynamodb_fixtures import new_client

    client = new_client(endpoint)
    table = f"ledger-restart-{uuid.uuid4().hex[:12]}"
    create_table(client, table)
    return StoreUnderTest.dynamodb(endpoint, table, client)


if __name__ == "__main__":
    main()
