"""Wait-for-result: many long polls on one ``ledger serve``, and how fast they wake.

The server is the real ``ledger serve`` (a child process, uvicorn, the embedded
SQLite store, ``LEDGER_EXECUTION_ENABLED=false`` so only the projector runs and
the attempts stay queued until this script moves them). The script:

1. prepares queued, projected attempts in the store file;
2. measures the server's resident memory and CPU time over an idle window
   with no waiter;
3. opens ``--waiters`` long polls (``GET /execution-attempts/{id}?wait=30``,
   several per attempt) from one asyncio client on loopback, and measures the
   same window again while they all wait;
4. runs the worker on some attempts (in this process, on the same file); the
   server's projector writes the view, which wakes the waiters. For each
   attempt it notes when the view row changed (polling the file every
   millisecond, read-only) and when each of its waiters got its answer.

Run: ``.venv/bin/python bench/bench_waiters.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness import ROOT, Lifecycle, Report, percentile, sqlite_store

HOST = "127.0.0.1"
WAIT_SECONDS = 30
IDLE_WINDOW_SECONDS = 5.0
QUICK_IDLE_WINDOW_SECONDS = 1.0  # --quick: the smoke test reads no figure
TICKS = os.sysconf("SC_CLK_TCK")


def prepare(db_path: str, attempts: int) -> list[str]:
    """Queued attempts owned by ``actor0``, their status views written."""
    from adapters.sqlite.views import SQLiteViewStore
    from projections.projector import Projector

    store = sqlite_store(db_path)
    life = Lifecycle(store)
    projector = Projector(store, SQLiteViewStore(store.recorder.datastore))  # type: ignore[attr-defined]
    ids = []
    for _ in range(attempts):
        _, token = life.propose_and_present(0)
        attempt_id = life.approve(token)
        projector.project_attempt(attempt_id)
        ids.append(attempt_id)
    store.recorder.close()
    return ids


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def settle(pid: int, limit: float = 60.0) -> None:
    """Until the server stops working (less than 2 % of a CPU over half a second):
    the idle windows must not include the tail of start-up or of the requests."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        if cpu_seconds(pid) - before < 0.01:
            return


def idle_window(pid: int, seconds: float) -> tuple[int, float]:
    """(RSS kB at the end, CPU seconds per second) over an idle window."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return rss_kb(pid), (cpu_seconds(pid) - before) / seconds


class Waiters:
    """Long polls on one asyncio loop (a thread); answer times by waiter index."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self.loop = asyncio.new_event_loop()
        self.answered: dict[int, tuple[float, str]] = {}
        self.sent = 0
        self.futures: list[Any] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def _one(self, index: int, attempt_id: str) -> None:
        reader, writer = await asyncio.open_connection(HOST, self.port)
        request = (
            f"GET /api/conversational/execution-attempts/{attempt_id}?wait={WAIT_SECONDS}"
            f" HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {self.token}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(request.encode())
        await writer.drain()
        with self.lock:
            self.sent += 1
        body = await reader.read()
        at = time.monotonic()
        status = "succeeded" if b'"status":"succeeded"' in body else "other"
        with self.lock:
            self.answered[index] = (at, status)
        writer.close()

    def start(self, assignments: list[str]) -> None:
        for index, attempt_id in enumerate(assignments):
            self.futures.append(
                asyncio.run_coroutine_threadsafe(self._one(index, attempt_id), self.loop)
            )

    def stop(self) -> None:
        for future in self.futures:
            future.cancel()
        time.sleep(0.2)  # let the cancellations run before the loop stops
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def view_status(db_path: str, attempt_id: str) -> str | None:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as connection:
        row = connection.execute(
            "SELECT data FROM ledger_views WHERE name='attempt_status' AND key=?", (attempt_id,)
        ).fetchone()
    if row is None:
        return None
    import json

    status: str = json.loads(row[0])["status"]
    return status


def wait_until_up(process: subprocess.Popen[bytes], base: str) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the server exited early")
        try:
            if httpx.get(base + "/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("the server did not answer within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--waiters", type=int, default=500)
    args = parser.parse_args()

    from adapters.settings import load_settings
    from api.http.auth import mint_token
    from tests.support.ministack import free_port

    report = Report("bench_waiters", args.quick)
    waiters = 50 if args.quick else args.waiters
    per_attempt = 5
    attempts = max(1, waiters // per_attempt)
    woken = min(attempts, 4 if args.quick else 20)
    idle = QUICK_IDLE_WINDOW_SECONDS if args.quick else IDLE_WINDOW_SECONDS
    with tempfile.TemporaryDirectory(prefix="bench-waiters-") as tmp:
        db_path = str(Path(tmp) / "ledger.db")
        ids = prepare(db_path, attempts)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        env.update(
            LEDGER_STORE="sqlite", LEDGER_SQLITE_PATH=db_path, LEDGER_EXECUTION_ENABLED="false"
        )
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from api.cli import main; main()",
                "serve",
                "--port",
                str(port),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        client: Waiters | None = None
        try:
            wait_until_up(process, f"http://{HOST}:{port}")
            token = mint_token(load_settings(), subject="actor0", role="actor")
            settle(process.pid)
            rss_idle, cpu_idle = idle_window(process.pid, idle)

            client = Waiters(port, token)
            assignments = [ids[i % attempts] for i in range(waiters)]
            client.start(assignments)
            deadline = time.monotonic() + 60
            while client.sent < waiters and time.monotonic() < deadline:
                time.sleep(0.05)
            settle(process.pid)  # the server reads each view once, then they all wait
            assert not client.answered, "a waiter answered before anything changed"
            rss_waiting, cpu_waiting = idle_window(process.pid, idle)
            assert not client.answered, "a waiter answered while nothing changed"

            life = Lifecycle(sqlite_store(db_path))
            worker = life.worker()
            latencies: list[float] = []
            for attempt_id in ids[:woken]:
                worker.process(attempt_id)
                while view_status(db_path, attempt_id) != "succeeded":
                    time.sleep(0.001)
                changed = time.monotonic()
                mine = [i for i, a in enumerate(assignments) if a == attempt_id]
                until = time.monotonic() + 10
                while time.monotonic() < until:
                    with client.lock:
                        if all(i in client.answered for i in mine):
                            break
                    time.sleep(0.001)
                with client.lock:
                    for i in mine:
                        at, status = client.answered[i]
                        assert status == "succeeded", status
                        latencies.append(at - changed)
            life.store.recorder.close()
            still_waiting = waiters - len(client.answered)
        finally:
            if client is not None:
                client.stop()
            process.terminate()  # the long polls still waiting are answered at once
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)

    per_waiter = (rss_waiting - rss_idle) / waiters
    report.table(
        f"One `ledger serve`, {waiters} long polls waiting at once",
        ["", "RSS MB", f"CPU s/s over {idle:g} s idle"],
        [
            ["no waiter", f"{rss_idle / 1024:.1f}", f"{cpu_idle:.3f}"],
            [f"{waiters} waiters", f"{rss_waiting / 1024:.1f}", f"{cpu_waiting:.3f}"],
            [
                "difference",
                f"{(rss_waiting - rss_idle) / 1024:+.1f} ({per_waiter:.1f} kB per waiter)",
                f"{cpu_waiting - cpu_idle:+.3f}",
            ],
        ],
        align="lrr",
    )
    ms = [v * 1000 for v in latencies]
    report.table(
        "From the view change to the waiter's answer",
        ["answers", "p50 ms", "p95 ms", "max ms", "within 100 ms"],
        [
            [
                len(ms),
                f"{percentile(ms, 50):.1f}",
                f"{percentile(ms, 95):.1f}",
                f"{max(ms):.1f}",
                f"{sum(v <= 100 for v in ms)}/{len(ms)}",
            ]
        ],
        align="rrrrr",
    )
    report.write(
        INTRO.format(
            waiters=waiters,
            attempts=attempts,
            per=per_attempt,
            woken=woken,
            still=still_waiting,
            idle=idle,
        )
    )


INTRO = """
The real `ledger serve` (uvicorn, SQLite, execution disabled so only the
projector runs) with {attempts} queued attempts; {waiters} long polls
(`?wait=30`, {per} per attempt) from one asyncio client on loopback. The idle
windows are {idle:g} s each, measured once the server's CPU use has
settled (under 2 % over half a second) after start-up and after the
requests; "CPU s/s" is the server process's user+system CPU time per wall
second (from /proc), so the no-waiter row is the baseline of
the projector's own polling loop. Then the worker (in the benchmark
process, on the same file) settles {woken} attempts one by one; the server's
projector writes each view, and the time from the view row changing (seen by
polling the file every millisecond, read-only) to each waiter's answer is
measured with the same monotonic clock. {still} waiters were still waiting
when the server was stopped (their attempts never changed).
"""


if __name__ == "__main__":
    main()
