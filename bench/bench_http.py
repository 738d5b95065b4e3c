"""HTTP latency: ``GET /execution-attempts/{id}`` against a bare FastAPI route in
the same app, served by a real uvicorn on 127.0.0.1, in one run.

The server is a child process (this script with ``--serve``) on the embedded
store, with the ledger's app plus one extra route, ``/bench/bare``, that
returns a constant. The load generator is httpx with keep-alive connections
on a few threads, alternating the two routes request by request, bounded in
count and time, loopback only. The server is stopped at the end.

Run: ``.venv/bin/python bench/bench_http.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness import ROOT, Lifecycle, Report, percentile, run_threads, sqlite_store

HOST = "127.0.0.1"
THREADS = 4
TIME_CAP_SECONDS = 90.0


def serve(port: int, db_path: str) -> None:
    """The child: the ledger app plus a bare route, on uvicorn."""
    import uvicorn

    from adapters.bootstrap import build_ledger
    from adapters.settings import load_settings
    from api.http.app import create_app

    settings = load_settings(store="sqlite", sqlite_path=db_path)
    ledger = build_ledger(settings)
    app = create_app(settings, ledger=ledger)

    @app.get("/bench/bare")
    def bare() -> dict[str, bool]:
        return {"ok": True}

    try:
        uvicorn.run(app, host=HOST, port=port, log_level="warning", access_log=False)
    finally:
        ledger.close()


def prepare(db_path: str, attempts: int) -> list[str]:
    """Attempts run to ``succeeded`` and projected, owned by ``actor0``."""
    from adapters.sqlite.views import SQLiteViewStore
    from projections.projector import Projector

    store = sqlite_store(db_path)
    life = Lifecycle(store)
    projector = Projector(store, SQLiteViewStore(store.recorder.datastore))  # type: ignore[attr-defined]
    ids = []
    for _ in range(attempts):
        _, token = life.propose_and_present(0)
        attempt_id = life.approve(token)
        life.worker().process(attempt_id)
        projector.project_attempt(attempt_id)
        ids.append(attempt_id)
    store.recorder.close()
    return ids


def load(base: str, token: str, ids: list[str], total: int) -> dict[str, list[float]]:
    import httpx

    latencies: dict[str, list[float]] = {"status": [], "bare": []}
    lock = threading.Lock()
    deadline = time.monotonic() + TIME_CAP_SECONDS
    headers = {"Authorization": f"Bearer {token}"}

    def client(t: int) -> None:
        mine: dict[str, list[float]] = {"status": [], "bare": []}
        with httpx.Client(base_url=base, headers=headers, timeout=10.0) as http:
            for i in range(total // THREADS // 2):
                if time.monotonic() > deadline:
                    break
                for kind in (("status", "bare") if (i + t) % 2 else ("bare", "status")):
                    path = (f"/api/conversational/execution-attempts/{ids[i % len(ids)]}"
                            if kind == "status" else "/bench/bare")
                    start = time.perf_counter()
                    answer = http.get(path)
                    mine[kind].append(time.perf_counter() - start)
                    assert answer.status_code == 200, answer.text
        with lock:
            for kind in mine:
                latencies[kind].extend(mine[kind])

    run_threads(THREADS, client)
    return latencies


def wait_until_up(process: subprocess.Popen[bytes], base: str) -> None:
    import httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the server exited early")
        try:
            if httpx.get(base + "/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("the server did not answer within 30 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "DB"))
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1])
        return

    from adapters.settings import load_settings
    from api.http.auth import mint_token
    from tests.support.ministack import free_port

    report = Report("bench_http", args.quick)
    total, attempts, warmup = (200, 5, 40) if args.quick else (4000, 50, 400)
    with tempfile.TemporaryDirectory(dir=ROOT / "var" if (ROOT / "var").is_dir() else None,
                                     prefix="bench-http-") as tmp:
        db_path = str(Path(tmp) / "ledger.db")
        ids = prepare(db_path, attempts)
        port = free_port()
        base = f"http://{HOST}:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", str(port), db_path],
            env=env, stdin=subprocess.DEVNULL)
        try:
            wait_until_up(process, base)
            token = mint_token(load_settings(), subject="actor0", role="actor")
            load(base, token, ids, warmup)
            latencies = load(base, token, ids, total)
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)

    def ms(values: list[float], q: float) -> float:
        return percentile(values, q) * 1000

    rows: list[list[Any]] = []
    for kind, label in (("bare", "bare FastAPI route (`/bench/bare`)"),
                        ("status", "`GET /execution-attempts/{id}` (JWT, status view)")):
        values = latencies[kind]
        rows.append([label, len(values), f"{ms(values, 50):.2f}", f"{ms(values, 99):.2f}",
                     f"{ms(values, 50) / ms(latencies['bare'], 50):.2f}",
                     f"{ms(values, 99) / ms(latencies['bare'], 99):.2f}"])
    report.table("Latency on loopback, same app, same run",
                 ["route", "requests", "p50 ms", "p99 ms", "p50 ratio", "p99 ratio"], rows,
                 align="lrrrrr")
    p99 = ms(latencies["status"], 99) / ms(latencies["bare"], 99)
    report.write(INTRO.format(threads=THREADS, total=total, warmup=warmup, attempts=attempts,
                              p99=p99, verdict="met" if p99 <= 3 else "missed"))


INTRO = """
uvicorn (one worker process, the ledger's own app factory) on 127.0.0.1 with
the embedded SQLite store; {attempts} attempts run to `succeeded` and projected
beforehand. Load: {threads} httpx clients with keep-alive, each alternating the
two routes (order flipped per pair), {warmup} requests of warm-up, then
{total} requests, capped at 90 s. Both routes go through the same middleware
(body limit, error boundary); the status route also verifies the HS256 JWT,
reads the projected status view from SQLite, checks the owner and validates
the response model.

**p99 ratio {p99:.2f}; target <= 3: {verdict}.** Absolute milliseconds on this
shared two-CPU machine include the load generator competing with the server
for the same cores; the ratio is what carries over.
"""


if __name__ == "__main__":
    main()
