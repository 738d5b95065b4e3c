"""The peer's side of ``bench_peer.py``: DBOS Transact on SQLite doing the same
work as a ledger lifecycle's approval and run, lifecycles per second with 1
and with N callers.

It runs in its own virtual environment (``.venv-dbos``, ``make install-peer``),
never in the ledger's, and imports nothing of the ledger. ``bench_peer.py``
starts it as a subprocess and reads the one JSON line it prints.

A lifecycle: the caller starts a workflow, which waits for an approval
message with ``DBOS.recv``, then runs one step (``@DBOS.step``) and returns
its result; the caller sends the approval with ``DBOS.send`` and waits for the
workflow's result. The system database is a SQLite file in ``--directory``
(DBOS's SQLite system database: WAL, its own defaults); DBOS delivers a
message to a waiting ``recv`` by polling its notifications table every
``--polling`` seconds (``notification_listener_polling_interval_sec``; DBOS's
default is 1.0 s, its minimum 0.001 s).

Run: ``.venv-dbos/bin/python bench/peer_dbos.py --directory DIR --polling 0.01
--callers 1 4 --lifecycles 40 --rounds 3``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig

APPROVAL_TOPIC = "approval"


def define() -> Any:
    """The workflow and its step, registered before ``DBOS.launch``."""

    @DBOS.step()
    def execute(payload: str) -> dict[str, str]:
        return {"status": "succeeded", "receipt": payload}

    @DBOS.workflow()
    def lifecycle(payload: str) -> dict[str, str]:
        approval = DBOS.recv(APPROVAL_TOPIC, timeout_seconds=60)
        if approval != "approved":
            return {"status": "refused", "receipt": ""}
        return execute(payload)

    return lifecycle


def run_threads(count: int, body: Any) -> None:
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            body(index)
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def rate(workflow: Any, callers: int, total: int) -> tuple[float, float]:
    """Lifecycles per second and this process's CPU milliseconds per lifecycle."""
    per = max(1, total // callers)

    def caller(index: int) -> None:
        for _ in range(per):
            handle = DBOS.start_workflow(workflow, f"payload-{index}")
            DBOS.send(handle.get_workflow_id(), "approved", APPROVAL_TOPIC)
            result = handle.get_result()
            if result["status"] != "succeeded":
                raise AssertionError(result)

    start, cpu = time.perf_counter(), time.process_time()
    run_threads(callers, caller)
    done = per * callers
    return done / (time.perf_counter() - start), (time.process_time() - cpu) / done * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--directory", required=True, help="where the system database goes")
    parser.add_argument(
        "--polling",
        type=float,
        default=1.0,
        help="notification_listener_polling_interval_sec (DBOS's default: 1.0)",
    )
    parser.add_argument("--callers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--lifecycles", type=int, default=40, help="per round and caller count")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not Path(args.directory).is_dir():
        parser.error(f"--directory {args.directory!r} is not a directory")
    logging.getLogger("dbos").setLevel(logging.WARNING)
    database = Path(args.directory) / f"dbos-{args.polling:g}.sqlite"
    config: DBOSConfig = {
        "name": "ledger-bench-peer",
        "system_database_url": f"sqlite:///{database}",
        "notification_listener_polling_interval_sec": args.polling,
        "log_level": "WARNING",
        "run_admin_server": False,
    }
    DBOS(config=config)
    workflow = define()
    DBOS.launch()
    try:
        rate(workflow, max(args.callers), max(args.callers))  # warm-up
        found: dict[int, list[tuple[float, float]]] = {n: [] for n in args.callers}
        for _ in range(args.rounds):  # alternate, so that noise hits each alike
            for callers in args.callers:
                found[callers].append(rate(workflow, callers, args.lifecycles))
    finally:
        DBOS.destroy()
    answer = {
        "dbos_version": _version(),
        "polling": args.polling,
        "rates": {
            str(n): {
                "per_second": statistics.median(r for r, _ in found[n]),
                "cpu_ms": statistics.median(c for _, c in found[n]),
            }
            for n in args.callers
        },
    }
    json.dump(answer, sys.stdout)
    sys.stdout.write("\n")


def _version() -> str:
    from importlib.metadata import version

    return version("dbos")


if __name__ == "__main__":
    main()
