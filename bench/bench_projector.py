"""The live projector's status rows: folded from the events' data (the one status
fold, ``projections.status_fold.read_status``, as the projector does it) beside
the path before it (the stream loaded as an ``ExecutionAttempt`` and its row
read off the aggregate's fields), and a plain read of the same streams, in one
run on SQLite (the repository's disk, and a RAM file system when there is one).

Attempts are made through the protocol (each ends ``succeeded`` after four
events). Every figure is the best of ``--repeat`` alternating rounds over every
attempt, in this process's CPU time (waiting for a core on a busy machine does
not inflate it); each round makes the row and offers it to the view store,
which keeps the row it already has, so the write is the same refused write on
both paths.

Run: ``.venv/bin/python bench/bench_projector.py [--quick]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness import ROOT, Lifecycle, Report, sqlite_store

from adapters.bootstrap import build_views
from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from projections.ports import ViewRecord
from projections.status import status_record
from projections.status_fold import read_status

INTRO = """
Per attempt, in CPU microseconds (best of the rounds): the stream read alone,
the row through the aggregate (the projector before the one status fold) and
the row folded from the events' data (the projector now), each offered to the
view store as the projector does.
"""


def through_aggregate(store: LedgerStore, attempt_id: str) -> ViewRecord | None:
    attempt = store.get(ExecutionAttempt, attempt_id)
    return None if attempt is None else status_record(attempt)


def best_cpu(rounds: int, runs: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Alternating rounds of every run; the best CPU seconds of each."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, run in runs.items():
            started = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - started)
    return best


def measure(path: Path, attempts: int, rounds: int) -> list[list[str]]:
    store = sqlite_store(str(path))
    life = Lifecycle(store)
    worker = life.worker()
    ids = []
    for _ in range(attempts):
        _, token = life.propose_and_present()
        ids.append(life.approve(token))
        worker.process(ids[-1])
    views = build_views(store.recorder)
    for attempt_id in ids:  # every row current: each round's write is refused alike
        row = read_status(store, attempt_id)
        assert row is not None and row == through_aggregate(store, attempt_id)
        views.put_view(row)

    def read() -> None:
        for attempt_id in ids:
            store.read_stream(attempt_id)

    def offered(make: Callable[[LedgerStore, str], ViewRecord | None]) -> Callable[[], None]:
        def run() -> None:
            for attempt_id in ids:
                row = make(store, attempt_id)
                assert row is not None
                views.put_view(row)

        return run

    best = best_cpu(
        rounds,
        {
            "read": read,
            "aggregate": offered(through_aggregate),
            "fold": offered(read_status),
        },
    )
    store.recorder.close()  # type: ignore[attr-defined]
    per = {name: seconds / attempts * 1e6 for name, seconds in best.items()}
    return [
        ["plain read of the attempt stream (baseline)", f"{per['read']:.1f}", "-"],
        ["before: through the aggregate", f"{per['aggregate']:.1f}", "1.00"],
        [
            "after: the status fold of the events' data",
            f"{per['fold']:.1f}",
            f"{per['aggregate'] / per['fold']:.2f}",
        ],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="a small smoke run; figures not meaningful"
    )
    parser.add_argument("--repeat", type=int, default=7, help="alternating rounds (best of)")
    args = parser.parse_args()
    attempts, rounds = (40, 2) if args.quick else (1000, args.repeat)
    report = Report("bench_projector", args.quick)
    places = [("SQLite on the repository's disk", ROOT / "var")]
    if Path("/dev/shm").is_dir():
        places.append(("SQLite on a RAM file system (/dev/shm)", Path("/dev/shm")))
    headers = ["live projector, per attempt", "CPU microseconds", "speed-up over before"]
    for title, where in places:
        where.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="bench-projector-", dir=where))
        try:
            rows = measure(folder / "ledger.db", attempts, rounds)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        report.table(f"{title}: {attempts} attempts, best of {rounds}", headers, rows, "lrr")
    report.write(INTRO)


if __name__ == "__main__":
    main()
