"""Memory: peak resident set size (VmHWM) of the ledger's processes.

1. ``ledger serve`` on the embedded store (the real command, a child process):
   idle a few seconds after it answers ``/healthz``, then after 1,000 and
   10,000 lifecycles driven over HTTP (its own worker executes them with the
   development fakes). Issue 19's target: growth under 10 %.
2. The embedded runtime (the worker, projector and recovery loops that
   ``ledger serve`` runs, on the same ``build_ledger`` / ``build_runtime``
   wiring) after 1,000 and after 10,000 full lifecycles driven through the
   services; the worker loop picks every approval up from the notification
   log. Growth between the two must stay under 10 % (issue 19: no leak, no
   unbounded cache). Three executors side by side: the development fakes as
   ``ledger serve`` registers them, the fakes' file ledger as it was before
   (a SQLite connection per thread, and every executor call runs on a fresh
   thread), and an executor that keeps nothing (the ledger's own growth).
3. One worker batch of 100 DynamoDB stream records (ministack): 100 approvals
   are made, their stream records read back with the Streams API, and a fresh
   process runs the worker and the projector over the batch.

What the store itself keeps per lifecycle, with and without housekeeping, is
``bench_store_growth.py``'s table.

Each figure is measured in its own child process (``--child``) and read from
``/proc/<pid>/status``. Linux only.

Run: ``.venv/bin/python bench/bench_memory.py [--quick]``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import ROOT, Emulator, Lifecycle, Report, dynamodb_store

from adapters.executors.fake import EffectLedger, FileEffectLedger, register_fakes

HOST = "127.0.0.1"


def status_kib(pid: int | str = "self") -> dict[str, int]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def sqlite_memory_used() -> int:
    """Bytes SQLite has allocated in this process (page caches, statements,
    schemas of every connection); 0 where the library's symbol is not reachable."""
    import _sqlite3

    try:
        used = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    except (OSError, AttributeError):
        return 0
    used.restype = ctypes.c_int64
    return int(used())


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(extra)
    return env


# -- 1. ledger serve, idle ------------------------------------------------------------------


def serve_memory(tmp: Path, checkpoints: list[int]) -> tuple[dict[str, int], list[dict[str, int]]]:
    """The real ``ledger serve``: idle, then after each checkpoint of lifecycles
    driven over HTTP (propose, present, approve; its own worker executes each
    with the development fakes), once the last attempt has succeeded."""
    import httpx

    from tests.support.http_approvals import API, approve_one, headers, set_up_directory
    from tests.support.ministack import free_port

    port = free_port()
    env = child_env(LEDGER_STORE="sqlite", LEDGER_SQLITE_PATH=str(tmp / "serve.db"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from api.cli import main; main()",
            "serve",
            "--host",
            HOST,
            "--port",
            str(port),
        ],
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("ledger serve did not start")
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        time.sleep(3)  # idle: the worker and recovery loops tick over
        idle = status_kib(process.pid)
        marks: list[dict[str, int]] = []
        admin = headers("admin", subject="root")
        with httpx.Client(base_url=base, timeout=30) as client:
            set_up_directory(client)
            done, last = 0, ""
            for checkpoint in checkpoints:
                while done < checkpoint:
                    last = approve_one(client, done)
                    done += 1
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:  # let its worker catch up
                    answer = client.get(f"{API}/execution-attempts/{last}", headers=admin)
                    if answer.status_code == 200 and answer.json()["status"] == "succeeded":
                        break
                    time.sleep(0.1)
                else:
                    raise RuntimeError(f"attempt {last} did not succeed")
                time.sleep(2)
                marks.append({"lifecycles": done, **status_kib(process.pid)})
        return idle, marks
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


# -- 2. the embedded runtime under lifecycles ---------------------------------------------


def deep_size(value: Any, seen: set[int] | None = None) -> int:
    """Bytes held by a structure of dicts, lists, tuples and scalars, each object
    counted once (shared strings such as capability names are not repeated)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, list | tuple):
        size += sum(deep_size(v, seen) for v in value)
    return size


class ForgetfulEffects(EffectLedger):
    """The fake provider without its memory of calls and effects: what the ledger
    holds by itself when the executor is a real, remote provider."""

    def record_call(self, capability: str, key: str) -> None:
        return None

    def apply(self, key: str, receipt: dict[str, Any]) -> dict[str, Any]:
        return receipt


class PerThreadEffects(FileEffectLedger):
    """The fakes' file ledger before issue 19's fix, kept to measure it side by side:
    a connection per thread with SQLite's default page cache, so every executor
    call (each on a fresh thread) opened a connection and left it to the collector."""

    def __init__(self, path: str) -> None:
        self._local = threading.local()
        super().__init__(path)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        yield db


EXECUTORS = ("fakes", "fakes-per-thread", "forgetful")


def lifecycles_child(db_path: str, checkpoints: list[int], executors: str) -> None:
    from adapters.bootstrap import build_ledger
    from adapters.executors.registry import StaticExecutorRegistry
    from adapters.runtime import build_runtime
    from adapters.settings import load_settings
    from domain.attempt import AttemptStatus, ExecutionAttempt

    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=db_path))
    if executors != "fakes":
        ledger.registry = StaticExecutorRegistry()
        ledger.effects = register_fakes(
            ledger.registry,
            ForgetfulEffects()
            if executors == "forgetful"
            else PerThreadEffects(db_path + ".per-thread-effects"),
        )
    runtime = build_runtime(ledger)
    runtime.poll_seconds = 0.02
    runtime.start()
    life = Lifecycle(ledger.store, registry=ledger.registry, effects=ledger.effects)
    done = 0
    last = ""
    try:
        for checkpoint in checkpoints:
            while done < checkpoint:
                _, token = life.propose_and_present(0)
                last = life.approve(token)
                done += 1
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # let the worker catch up
                attempt = ledger.store.get(ExecutionAttempt, last)
                if attempt is not None and attempt.status is AttemptStatus.SUCCEEDED:
                    break
                time.sleep(0.05)
            gc.collect()
            assert ledger.effects is not None
            memory = status_kib()  # before anything below reads the fakes' records
            fakes = 0
            if isinstance(ledger.effects, EffectLedger):  # a file-backed one holds nothing
                seen: set[int] = set()
                fakes = deep_size(ledger.effects.effects, seen) + deep_size(
                    ledger.effects.calls, seen
                )
            connections = getattr(ledger.store.recorder.datastore, "open_connections", 0)
            print(
                json.dumps(
                    {
                        "lifecycles": done,
                        "fakes": fakes,
                        "connections": connections,
                        "kind": type(ledger.effects).__name__,
                        "sqlite": sqlite_memory_used(),
                        **memory,
                    }
                ),
                flush=True,
            )
    finally:
        # On a loaded machine a loop can still be in a step after stop()'s default
        # wait; closing the connections under it could crash the process.
        runtime.stop(grace=120)
        if not any(thread.is_alive() for thread in runtime.threads):
            ledger.close()


def embedded_runtime(tmp: Path, checkpoints: list[int], executors: str) -> list[dict[str, Any]]:
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else tmp) as where:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                "lifecycles",
                str(Path(where) / "l.db"),
                ",".join(map(str, checkpoints)),
                executors,
            ],
            env=child_env(PYTHONFAULTHANDLER="1"),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
    if out.returncode != 0:
        raise RuntimeError(
            f"the {executors} child failed ({out.returncode}):\n{out.stdout}\n{out.stderr[-4000:]}"
        )
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


# -- 3. one worker batch of stream records ---------------------------------------------------


def batch_child(endpoint: str, table: str, size: int) -> None:
    from adapters.bootstrap import build_ledger
    from adapters.dynamodb.client import make_client
    from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
    from adapters.runtime import make_worker
    from adapters.settings import load_settings
    from adapters.streams import work_from_records

    credentials = {
        "region_name": "us-east-1",
        "aws_access_key_id": "bench",
        "aws_secret_access_key": "bench",
    }
    client = make_client(endpoint_url=endpoint, **credentials)
    ledger = build_ledger(
        load_settings(store="dynamodb", dynamodb_table=table),
        recorder=DynamoDBLedgerRecorder(table, client),
    )
    worker = make_worker(ledger)
    import boto3

    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, **credentials)
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            answer = streams.get_records(ShardIterator=iterator, Limit=1000)
            records += answer.get("Records", [])
            if not answer.get("Records"):
                break
            iterator = answer.get("NextShardIterator")
    work = work_from_records(records)[:size]
    gc.collect()
    before = status_kib()
    outcomes = [worker.process(attempt_id).value for attempt_id in work]
    ledger.projector.project_streams(work)
    gc.collect()
    print(
        json.dumps(
            {
                "before": before,
                "after": status_kib(),
                "records": len(records),
                "work": len(work),
                "succeeded": outcomes.count("succeeded"),
            }
        ),
        flush=True,
    )


def worker_batch(size: int) -> dict[str, Any]:
    with Emulator() as emulator:
        client = emulator.client()
        table = emulator.table(client)
        life = Lifecycle(dynamodb_store(client, table))
        for _ in range(size):
            life.approve(life.propose_and_present(0)[1])
        out = subprocess.run(
            [sys.executable, __file__, "--child", "batch", emulator.url, table, str(size)],
            env=child_env(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        client.close()
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "lifecycles":
            lifecycles_child(rest[0], [int(n) for n in rest[1].split(",")], rest[2])
        else:
            batch_child(rest[0], rest[1], int(rest[2]))
        return

    report = Report("bench_memory", args.quick)
    checkpoints = [100, 1_000] if args.quick else [1_000, 10_000]
    batch = 10 if args.quick else 100
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        idle, served = serve_memory(Path(tmp), checkpoints)
        marks, before, own = (
            embedded_runtime(Path(tmp), checkpoints, executors) for executors in EXECUTORS
        )
    result = worker_batch(batch)
    assert result["succeeded"] == batch, result
    growth, before_growth, own_growth, serve_growth = (
        run[-1]["VmRSS"] / run[0]["VmRSS"] - 1 for run in (marks, before, own, served)
    )
    first, last = checkpoints[0], checkpoints[-1]
    rows = [
        ["`ledger serve`, idle (SQLite)", mib(idle["VmRSS"]), mib(idle["VmHWM"]), ""],
        *[
            [
                f"`ledger serve` after {m['lifecycles']:,} lifecycles over HTTP",
                mib(m["VmRSS"]),
                mib(m["VmHWM"]),
                "",
            ]
            for m in served
        ],
        [
            f"growth {first:,} -> {last:,} lifecycles",
            "",
            "",
            f"**{serve_growth * 100:+.1f} %** of RSS "
            f"(+{mib(served[-1]['VmRSS'] - served[0]['VmRSS'])} MiB)",
        ],
        *runtime_rows("with the development fakes", marks, first, last, "**{growth}**"),
        *runtime_rows(
            "with the fakes' file ledger before the fix (a connection per thread)",
            before,
            first,
            last,
            "{growth} (the path before)",
        ),
        *runtime_rows(
            "with an executor keeping nothing", own, first, last, "{growth} (the ledger's own)"
        ),
        [
            f"worker process before its batch of {batch} stream records",
            mib(result["before"]["VmRSS"]),
            mib(result["before"]["VmHWM"]),
            "",
        ],
        [
            f"worker process after the batch ({result['succeeded']} succeeded, projected)",
            mib(result["after"]["VmRSS"]),
            mib(result["after"]["VmHWM"]),
            f"+{mib(result['after']['VmHWM'] - result['before']['VmHWM'])} MiB peak",
        ],
    ]
    report.table(
        "Resident memory (MiB)", ["process", "RSS", "peak RSS (VmHWM)", "note"], rows, align="lrrl"
    )
    report.write(
        INTRO.format(
            serve_verdict="met" if serve_growth < 0.10 else "missed",
            first=first,
            last=last,
            growth=growth * 100,
            before=before_growth * 100,
            serve=serve_growth * 100,
            own=own_growth * 100,
            batch=batch,
            verdict="met" if growth < 0.10 else "missed",
            sqlite=(marks[-1]["sqlite"] - marks[0]["sqlite"]) / 2**20,
            rss=(marks[-1]["VmRSS"] - marks[0]["VmRSS"]) / 1024,
        )
    )


def runtime_rows(
    label: str, run: list[dict[str, Any]], first: int, last: int, verdict: str
) -> list[list[str]]:
    """The embedded runtime's RSS at each checkpoint, and its growth with what SQLite
    itself holds (page caches that fill to their fixed size as the files grow)."""
    growth = run[-1]["VmRSS"] / run[0]["VmRSS"] - 1
    sqlite = (run[-1]["sqlite"] - run[0]["sqlite"]) / 2**20
    return [
        *[
            [
                f"embedded runtime {label}, after {m['lifecycles']:,} lifecycles",
                mib(m["VmRSS"]),
                mib(m["VmHWM"]),
                f"SQLite's own memory {m['sqlite'] / 2**20:.1f} MiB",
            ]
            for m in run
        ],
        [
            f"growth {first:,} -> {last:,} lifecycles",
            "",
            "",
            verdict.format(growth=f"{growth * 100:+.1f} %") + " of RSS "
            f"(+{mib(run[-1]['VmRSS'] - run[0]['VmRSS'])} MiB, of which SQLite {sqlite:+.1f} MiB)"
            f"; effect ledger: {run[-1]['kind']}, in-memory records "
            f"+{(run[-1]['fakes'] - run[0]['fakes']) / 2**20:.1f} MiB; ledger connections open: "
            f"{run[-1]['connections']}",
        ],
    ]


INTRO = """
Peak and current resident set size from `/proc/<pid>/status` of child
processes: the real `ledger serve` command (idle for 3 s after it answered,
then after each checkpoint of lifecycles proposed, presented and approved
over HTTP on one keep-alive connection and executed by its own worker with
the development fakes, 2 s after the last one succeeded), an embedded
runtime (worker, projector and recovery loops on a SQLite file in
`/dev/shm`, lifecycles driven through the services, measured after the
worker caught up and a `gc.collect()`), and a fresh worker process running one
batch of {batch} stream records from ministack's Streams API. These are counts
of this machine's pages, not timings; Python's allocator keeps freed arenas,
so the peak, not the current RSS, is the figure to size a Lambda by.
"SQLite's own memory" is `sqlite3_memory_used()` of the process.

**Growth of `ledger serve` from {first:,} to {last:,} lifecycles over HTTP:
{serve:+.1f} %; target under 10 %: {serve_verdict}.** In the embedded runtime,
which shows what the growth is made of, with the development fakes (what
`ledger serve` registers): {growth:+.1f} % ({verdict}).
Of its {rss:+.1f} MiB, SQLite's own allocations account for {sqlite:+.1f} MiB:
the page caches of the ledger's connections (one per thread that uses the
store, at most 2 MiB each, and the soft heap limit over all of them), which
fill towards that size as the file grows; bounded, not a leak. The Python
heap stays flat (measured apart with tracemalloc over the same loop: under 1 KB
more at 10,000 lifecycles than at 1,000).
The same run with the fakes' file ledger as it was before (a connection per
thread; the worker runs every executor call on a fresh thread, so each call
opened a connection with its own page cache and left it to the collector, and
the allocator's arenas fragmented with the churn): {before:+.1f} %. Now one
connection per process, behind a lock, with a 256 KiB page cache.
The ledger's own growth (an executor that keeps nothing, as a real, remote
provider): {own:+.1f} %. The fake provider remembers every effect by
idempotency key in a file beside the ledger
(`<LEDGER_SQLITE_PATH>.fake-effects`), not in memory.
"""


if __name__ == "__main__":
    main()
