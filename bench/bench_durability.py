"""Durability by need on SQLite: fsyncs per lifecycle, counted by ``strace``,
and lifecycles per second, with every commit fsynced (``synchronous=FULL``, as
main opened the file before) beside only the durable ones (``NORMAL`` plus a
``FULL`` transaction for each commit that answers a caller or precedes a call).

A lifecycle is propose, present, approve, the worker's run (lease, dispatch
marker, executor call, result) and the status projector's write after each of
approve and result. ``strace -f -c -e trace=fsync,fdatasync`` counts the sync
calls of a child process that makes N lifecycles after its set-up; the set-up
is measured alone (N = 0) and subtracted. A recorder that counts its durable
commits (``DurableCounting``) counts the commits that asked for durability.

Run: ``.venv/bin/python bench/bench_durability.py [--quick]`` (needs ``strace``;
without it only the rates and the counted durable commits are printed).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import ROOT, Lifecycle, Report, parse_args

from adapters.sqlite.backend import SQLiteBackend
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from projections.projector import Projector

ANSWERED_OR_BEFORE_A_CALL = 5  # propose, present, approve, dispatch marker, result


class DurableCounting(SQLiteLedgerRecorder):
    """The SQLite recorder, counting the commits that asked for durability."""

    durable = 0

    def insert_events(self, stored_events: Any, **kwargs: Any) -> Any:
        result = super().insert_events(stored_events, **kwargs)
        self.durable += bool(kwargs.get("durable", True))
        return result


def child(synchronous: str, count: int, path: str) -> None:
    """Make ``count`` lifecycles on a new file; print the durable commits counted."""
    recorder = DurableCounting(open_datastore(path, synchronous=synchronous))  # type: ignore[arg-type]
    recorder.create_table()
    store = LedgerStore(recorder)
    life = Lifecycle(store)
    projector = Projector(store, SQLiteBackend(recorder).views)
    worker = life.worker()
    durable_before = recorder.durable
    start = time.perf_counter()
    for _ in range(count):
        _, token = life.propose_and_present(0)
        attempt_id = life.approve(token, 0)
        projector.project_attempt(attempt_id)
        worker.process(attempt_id)
        projector.project_attempt(attempt_id)
    seconds = time.perf_counter() - start
    print(json.dumps({"durable": recorder.durable - durable_before, "seconds": seconds}))
    recorder.close()


def run_child(synchronous: str, count: int, folder: Path, strace: str | None) -> dict[str, Any]:
    path = folder / f"{synchronous}-{count}-{time.monotonic_ns()}.db"
    command = [sys.executable, __file__, "--child", synchronous, str(count), str(path)]
    if strace is not None:
        trace = folder / "strace.txt"
        command = [strace, "-f", "-y", "-e", "trace=fsync,fdatasync", "-o", str(trace), *command]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["syncs"] = result["main_file_syncs"] = None
    if strace is not None:
        calls = re.findall(r"(?:fsync|fdatasync)\(\d+<([^>]*)>\)", trace.read_text())
        result["syncs"] = len(calls)
        # A checkpoint syncs the WAL and then the main file, and the first commit
        # after it syncs the header of the restarted WAL (seen with strace, also
        # under synchronous=NORMAL); nothing else syncs the main file.
        result["main_file_syncs"] = sum(1 for name in calls if name == str(path))
    return result


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    args = parse_args(__doc__ or "")
    report = Report("bench_durability", args.quick)
    count = 20 if args.quick else 200
    best_of = 1 if args.quick else 3  # a smoke run's rates mean nothing anyway
    strace = shutil.which("strace")
    # a smoke run times its traced run: one process start fewer per row
    timed_traced = args.quick and strace is not None
    timing = "strace on: --quick" if timed_traced else f"no strace, best of {best_of}"
    headers = [
        "file system",
        "synchronous",
        "lifecycles",
        "fsyncs per lifecycle (strace)",
        "of which checkpoints",
        "commit fsyncs per lifecycle",
        "durable commits per lifecycle (counted)",
        f"lifecycles/s ({timing})",
    ]
    rows: list[list[Any]] = []
    base = ROOT / "var"
    base.mkdir(exist_ok=True)
    for label, parent in (("repository disk", base), ("RAM (/dev/shm)", Path("/dev/shm"))):
        with tempfile.TemporaryDirectory(dir=parent, prefix="bench-durability-") as tmp:
            folder = Path(tmp)
            for synchronous in ("FULL", "NORMAL"):
                setup = run_child(synchronous, 0, folder, strace) if strace else None
                traced = run_child(synchronous, count, folder, strace) if strace else None
                # the best of three runs without strace (a shared machine; one in a smoke run)
                timed = (
                    traced
                    if timed_traced and traced is not None
                    else min(
                        (run_child(synchronous, count, folder, None) for _ in range(best_of)),
                        key=lambda r: float(r["seconds"]),
                    )
                )
                syncs = checkpoints = commits = "-"
                if traced is not None and setup is not None:
                    total = traced["syncs"] - setup["syncs"]
                    ckpt = 3 * (traced["main_file_syncs"] - setup["main_file_syncs"])
                    syncs, checkpoints = f"{total / count:.2f}", f"{ckpt / count:.2f}"
                    commits = f"{(total - ckpt) / count:.2f}"
                rows.append(
                    [
                        label,
                        synchronous
                        + (" (main before)" if synchronous == "FULL" else " + durable commits"),
                        count,
                        syncs,
                        checkpoints,
                        commits,
                        f"{timed['durable'] / count:.2f}",
                        f"{count / timed['seconds']:,.0f}",
                    ]
                )
    report.table("fsyncs and rate per lifecycle", headers, rows, align="llrrrrrr")
    report.write(
        INTRO.format(
            target=ANSWERED_OR_BEFORE_A_CALL,
            strace="strace" if strace else "no strace (not installed)",
        )
    )


INTRO = """
Target: fsyncs per lifecycle <= the commits whose answer is given or that
precede a call ({target}: propose 201, present 201, approve 202, dispatch
marker, result). Counted with {strace} (`-f -y`, so each call names its
file): a checkpoint (SQLite's, every 1,000 WAL pages) syncs the WAL and the
main file, and the first commit after it syncs the restarted WAL's header;
nothing else syncs the main file, so "of which checkpoints" is three times
the main file's syncs and the rest are commits. With
`synchronous=FULL` (main before) every commit fsyncs the WAL: the lease and
the projector's two tracked-view writes too. With durability by need only the
five durable commits do; the checkpoints' share is the same under both
settings (they copy the same pages). On a RAM file system an fsync costs next
to nothing, so the rate there shows what is left of our CPU.
"""


if __name__ == "__main__":
    main()
