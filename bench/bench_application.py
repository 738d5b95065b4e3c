"""The embedded lifecycle beside the eventsourcing library's own ``Application``,
and one-pass hashing beside the path before it, as ratios measured in one run.

1. Lifecycles per second on one thread (propose, present, approve, the
   worker's run to ``succeeded``) on SQLite, on the repository's file system
   and on a RAM file system, four ways in alternating rounds, each on its
   own database file in the same directory:
   - the ledger as it is (one-pass hashing: an event's canonical bytes are
     encoded once, through the C ``json`` encoder, and are its stored state;
     executor calls on pooled threads; the spec validated once);
   - the ledger before pooled calls (``--before-pool-only`` runs it alone): a
     thread started and joined for every executor call, and the stored spec
     validated again at the approval and at the pre-dispatch recheck;
   - the previous path (``--previous-only`` runs it alone): events stored in
     the library's JSON form, every stored predecessor encoded again when an
     event links to it, every encoding by the ``rfc8785`` package;
   - the library's ``Application`` (its SQLite persistence, its aggregates,
     no cache, no snapshots) doing a lifecycle's saves and gets: the same 6
     saves of the same 7 events at the same sizes, and the same 17 gets of
     aggregates of the same lengths, in the same order. It checks nothing:
     no authorization, no chain, no head index, no conditions, no lookups.
2. Canonical encodings per lifecycle, new and previous, counted in the run.
3. The encoders alone on a lifecycle's event bodies.

Run: ``.venv/bin/python bench/bench_application.py [--quick] [--profile]``.
"""

from __future__ import annotations

import argparse
import contextvars
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from harness import ROOT, Lifecycle, Report, sqlite_store

import domain.services.approval
import domain.services.recheck
from adapters.mapping import make_library_mapper
from adapters.store import LedgerStore
from domain import base, canonical
from domain.services.deadline import DeadlineExceeded, LateAnswer
from domain.spec import ProposalSpec, parse_spec, payload_hash

# -- the ledger, new and previous --------------------------------------------------


@contextmanager
def previous_path(store: LedgerStore) -> Iterator[None]:
    """Before one-pass hashing: the library's stored form and the reference encoder."""
    mapper, fast = store.mapper, canonical.fast_domain
    store.mapper = make_library_mapper()
    canonical.fast_domain = lambda value: False
    try:
        yield
    finally:
        store.mapper, canonical.fast_domain = mapper, fast


class ThreadPerCall:
    """The call runner before the pool: a thread started and joined per call."""

    def run(self, call: Callable[[], Any], timeout: float, late: LateAnswer) -> Any:
        box: dict[str, Any] = {}
        lock = threading.Lock()
        state = {"abandoned": False, "done": False}

        def target() -> None:
            try:
                box["result"] = call()
            except BaseException as exc:
                box["error"] = exc
            with lock:
                state["done"] = True
                abandoned = state["abandoned"]
            if abandoned:
                late(box.get("result"), box.get("error"))

        context = contextvars.copy_context()
        thread = threading.Thread(
            target=context.run, args=(target,), name="executor-call", daemon=True
        )
        thread.start()
        thread.join(max(0.0, timeout))
        with lock:
            if not state["done"]:
                state["abandoned"] = True
                raise DeadlineExceeded()
        if "error" in box:
            raise box["error"]
        return box["result"]


def validated_again(data: Any, expected_hash: str) -> ProposalSpec | None:
    """The stored spec before it was validated once: validated on every read."""
    spec = parse_spec(data)
    return spec if payload_hash(spec) == expected_hash else None


@contextmanager
def before_pool() -> Iterator[None]:
    """The stored spec validated again at the approval and the recheck."""
    modules = (domain.services.approval, domain.services.recheck)
    real = [m.stored_spec for m in modules]  # fails here if the code moved elsewhere
    for module in modules:
        module.stored_spec = validated_again  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, function in zip(modules, real, strict=True):
            module.stored_spec = function  # type: ignore[attr-defined]


class LedgerRun:
    """A directory and a worker on their own file; ``path_`` selects the code path:
    ``new``, ``before_pool`` or ``previous``."""

    def __init__(self, path: Path, path_: str) -> None:
        self.path_ = path_
        self.store = sqlite_store(str(path))
        with self.context():
            self.life = Lifecycle(self.store)
            if path_ == "new":
                self.worker = self.life.worker()
            else:
                self.worker = self.life.worker(calls=ThreadPerCall())

    @contextmanager
    def context(self) -> Iterator[None]:
        if self.path_ == "previous":
            with previous_path(self.store), before_pool():
                yield
        elif self.path_ == "before_pool":
            with before_pool():
                yield
        else:
            yield

    def one(self) -> None:
        with self.context():
            outcome = self.life.run(0, self.worker)
        assert outcome.value == "succeeded", outcome

    def close(self) -> None:
        self.store.recorder.close()  # type: ignore[attr-defined]


# -- the library's Application doing a lifecycle's saves and gets -------------------------

# Sizes of the ledger's stored states for these events (bytes, measured on a run):
# directory records 330-480, Proposed 1,230, Presented 590, Claimed 370, Queued
# 1,050, Leased 400, DispatchStarted 300, ResultRecorded 420.


def _payload(size: int) -> dict[str, str]:
    return {"payload": "x" * max(0, size - 120)}


class Record(Aggregate):
    @event("Registered")
    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values


class ProposalAgg(Aggregate):
    @event("Proposed")
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.presentations: list[dict[str, Any]] = []

    @event("Presented")
    def present(self, presentation: dict[str, Any]) -> None:
        self.presentations.append(presentation)

    @event("Claimed")
    def claim(self, claim: dict[str, Any]) -> None:
        self.claimed = claim


class AttemptAgg(Aggregate):
    @event("Queued")
    def __init__(self, queued: dict[str, Any]) -> None:
        self.queued = queued

    @event("Leased")
    def lease(self, lease: dict[str, Any]) -> None:
        self.leased = lease

    @event("DispatchStarted")
    def start(self, marker: dict[str, Any]) -> None:
        self.marker = marker

    @event("ResultRecorded")
    def record(self, result: dict[str, Any]) -> None:
        self.result = result


class ApplicationRun:
    """The eventsourcing ``Application`` on its own SQLite file."""

    def __init__(self, path: Path) -> None:
        self.app: Application[UUID] = Application(
            env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}
        )
        records = [Record(values=_payload(size)) for size in (330, 405, 387, 338, 476, 330)]
        self.app.save(*records)
        self.directory = [r.id for r in records]

    def one(self) -> None:
        get, save = self.app.repository.get, self.app.save
        get(self.directory[4])  # propose: the executor build
        proposal = ProposalAgg(spec=_payload(1230))
        save(proposal)
        proposal = get(proposal.id)  # present
        proposal.present(_payload(590))
        save(proposal)
        proposal = get(proposal.id)  # approve: proposal + six records
        for record_id in self.directory:
            get(record_id)
        proposal.claim(_payload(370))
        attempt = AttemptAgg(queued=_payload(1050))
        save(proposal, attempt)
        attempt = get(attempt.id)  # worker: lease
        attempt.lease(_payload(400))
        save(attempt)
        get(proposal.id)  # recheck: proposal + six records
        for record_id in self.directory:
            get(record_id)
        attempt.start(_payload(300))  # the dispatch marker
        save(attempt)
        attempt.record(_payload(420))  # the result
        save(attempt)

    def close(self) -> None:
        self.app.close()


VARIANTS = {
    "new": "ledger",
    "before_pool": "ledger before pooled calls (thread per call, spec validated 3x)",
    "previous": "ledger, previous path (before one-pass hashing too)",
}

# -- measuring ---------------------------------------------------------------------------


def rate(operation: Callable[[], Any], count: int) -> tuple[float, float]:
    """Operations per second of wall time and per second of this process's CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        operation()
    return (count / (time.perf_counter() - wall), count / max(time.process_time() - cpu, 1e-9))


def round_robin(
    operations: list[Callable[[], Any]], samples: int, per_sample: int
) -> list[tuple[float, float]]:
    """Median (wall, CPU) rates of each operation over short samples taken in turn.

    The CPU rate is what a loaded machine cannot distort: the wall rate of a
    lifecycle also pays for every wait to be scheduled again (the executor call
    runs on another thread), which a shared machine makes long.
    """
    for op in operations:
        rate(op, max(1, per_sample // 4))
    results: list[list[tuple[float, float]]] = [[] for _ in operations]
    for _ in range(samples):
        for i, op in enumerate(operations):
            results[i].append(rate(op, per_sample))
    return [
        (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for r in results
    ]


def lifecycles(directory: Path, samples: int, per_sample: int) -> list[tuple[float, float]]:
    """Rates of: new, before-pool, previous-path and Application lifecycles."""
    runs = [
        LedgerRun(directory / f"{name}.db", name) for name in ("new", "before_pool", "previous")
    ]
    app = ApplicationRun(directory / "application.db")
    try:
        return round_robin([*(r.one for r in runs), app.one], samples, per_sample)
    finally:
        for run in runs:
            run.close()
        app.close()


def encodings_per_lifecycle(directory: Path, previous: bool, count: int) -> tuple[float, float]:
    """(canonical encodings, of which event bodies) per lifecycle."""
    run = LedgerRun(directory / f"count-{previous}.db", "previous" if previous else "new")
    run.one()
    calls = {"all": 0, "events": 0}
    real = canonical.canonical_json

    def counted(value: Any) -> bytes:
        calls["all"] += 1
        calls["events"] += isinstance(value, dict) and "stream" in value
        return real(value)

    modules = [
        m
        for m in list(sys.modules.values())
        if getattr(m, "canonical_json", None) is real and m is not canonical
    ]
    for module in modules:
        module.canonical_json = counted  # type: ignore[attr-defined]
    try:
        for _ in range(count):
            run.one()
    finally:
        for module in modules:
            module.canonical_json = real  # type: ignore[attr-defined]
        run.close()
    return calls["all"] / count, calls["events"] / count


def encoders(directory: Path, samples: int) -> list[tuple[str, float, float]]:
    """Encodings per second of a lifecycle's event bodies: reference vs canonical_json."""
    run = LedgerRun(directory / "bodies.db", "new")
    run.one()
    bodies = []
    for stream_id in run.store.recorder.select_stream_ids():  # type: ignore[attr-defined]
        for ev in run.store.events(stream_id):
            if isinstance(ev, base.LedgerEvent):
                bodies.append((type(ev).__name__, ev.body()))
    run.close()
    rows = []
    for kind in ("Proposed", "Queued", "Leased"):
        body = next(b for name, b in bodies if name == kind)
        (reference, _), (fast, _) = round_robin(
            [
                lambda b=body: canonical.reference_json(b),
                lambda b=body: canonical.canonical_json(b),
            ],
            samples,
            2000,
        )
        rows.append((kind, reference, fast))
    return rows


PROFILE_PARTS: list[tuple[str, str, str]] = [
    # (what, file suffix, function): cumulative time of that function
    ("aggregate reads (LedgerStore.get: select, decode, fold)", "adapters/store.py", "get"),
    ("  of which decoding stored events", "adapters/mapping.py", "to_domain_event"),
    ("commits (events, head index, lookups, due items, checks)", "adapters/store.py", "commit"),
    ("  of which encoding new events (canonical bytes)", "adapters/mapping.py", "to_stored_event"),
    (
        "the executor call on a pooled thread (hand-off, run, wait)",
        "domain/services/deadline.py",
        "run",
    ),
    ("spec validation (pydantic), once", "domain/spec.py", "parse_spec"),
    ("stored spec taken back by its hash (approval, recheck)", "domain/spec.py", "stored_spec"),
    ("every canonical encoding (events, specs, ids)", "domain/canonical.py", "canonical_json"),
]


class TimedCalls:
    """Wraps a call runner: wall time inside ``run`` and inside the executor itself."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.waited = self.executed = 0.0

    def run(self, call: Callable[[], Any], timeout: float, late: LateAnswer) -> Any:
        def timed() -> Any:
            started = time.perf_counter()
            try:
                return call()
            finally:
                self.executed += time.perf_counter() - started

        started = time.perf_counter()
        try:
            return self.inner.run(timed, timeout, late)
        finally:
            self.waited += time.perf_counter() - started


def hand_offs(directory: Path, count: int) -> list[list[str]]:
    """Wall time per lifecycle spent handing the executor call to another thread and
    getting its answer back (time in the runner minus the executor's own), pooled
    and thread per call, in turn on the same kind of file."""
    runs = {
        name: LedgerRun(directory / f"handoff-{name}.db", name) for name in ("new", "before_pool")
    }
    timers = {}
    for name, run in runs.items():
        timers[name] = TimedCalls(run.worker.calls)
        run.worker.calls = timers[name]
    totals = {name: [0.0, 0.0] for name in runs}
    for name, run in runs.items():
        for _ in range(10):
            run.one()
        timers[name].waited = timers[name].executed = 0.0
    for _ in range(count // 10):
        for name, run in runs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(10):
                run.one()
            totals[name][0] += time.perf_counter() - wall
            totals[name][1] += time.process_time() - cpu
    rows = []
    done = (count // 10) * 10
    for name, run in runs.items():
        timer = timers[name]
        rows.append(
            [
                VARIANTS[name],
                f"{totals[name][0] / done * 1000:.2f}",
                f"{totals[name][1] / done * 1000:.2f}",
                f"{timer.executed / done * 1000:.3f}",
                f"{(timer.waited - timer.executed) / done * 1000:.3f}",
                f"{(timer.waited - timer.executed) / totals[name][0]:.0%}",
            ]
        )
        run.close()
    return rows


def profile(directory: Path, count: int) -> tuple[list[list[str]], str]:
    """cProfile of ``count`` new-path lifecycles: shares of the parts, and the top."""
    run = LedgerRun(directory / "profile.db", "new")
    for _ in range(10):
        run.one()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(count):
        run.one()
    profiler.disable()
    run.close()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    entries = stats.stats  # type: ignore[attr-defined]
    total = max(ct for (_, _, name), (_, _, _, ct, _) in entries.items() if name == "one")
    rows = []
    for label, suffix, function in PROFILE_PARTS:
        spent = sum(
            ct
            for (path, _, name), (_, _, _, ct, _) in entries.items()
            if name == function and path.endswith(suffix)
        )
        rows.append([label, f"{spent / count * 1000:.2f}", f"{spent / total:.0%}"])
    rows.append(["a whole lifecycle", f"{total / count * 1000:.2f}", "100%"])
    stats.sort_stats("tottime").print_stats(20)
    text = out.getvalue()
    text = text.replace(str(ROOT) + "/", "").replace(sys.prefix + "/", "")
    return rows, text.replace(os.path.dirname(os.__file__) + "/", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small smoke run (seconds); results are not meaningful",
    )
    parser.add_argument(
        "--previous-only",
        action="store_true",
        help="run only the previous path's lifecycles (no results file)",
    )
    parser.add_argument(
        "--before-pool-only",
        action="store_true",
        help="run only the lifecycles before pooled calls (no results file)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="add a cProfile of the new path's lifecycles on the RAM file system",
    )
    args = parser.parse_args()
    if args.previous_only or args.before_pool_only:
        name = "previous" if args.previous_only else "before_pool"
        with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
            run = LedgerRun(Path(tmp) / f"{name}.db", name)
            wall, cpu = rate(run.one, 20 if args.quick else 300)
            print(f"{VARIANTS[name]}: {wall:,.0f} lifecycles/s ({cpu:,.0f} per CPU second)")
            run.close()
        return
    load_at_start = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    report = Report("bench_application", args.quick)
    samples, per_sample = (2, 4) if args.quick else (7, 40)
    places = [
        ("repository file system (fsync per commit)", ROOT / "var"),
        ("RAM file system /dev/shm (no sync cost)", Path("/dev/shm")),
    ]
    rows, figures = [], {}
    for label, where in places:
        if not where.is_dir():
            if where.parent != ROOT:
                continue
            where.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=where, prefix="bench-") as tmp:
            measured = lifecycles(Path(tmp), samples, per_sample)
        (new, new_cpu), (app, app_cpu) = measured[0], measured[-1]
        figures[label] = new / app
        figures[label + " cpu"] = new_cpu / app_cpu
        before, before_cpu = measured[1]
        figures[label + " gain"] = new / before
        figures[label + " gain cpu"] = new_cpu / before_cpu
        for name, (wall, cpu) in zip([*VARIANTS, "application"], measured, strict=True):
            rows.append(
                [
                    label,
                    VARIANTS.get(name, "the library's Application"),
                    f"{wall:,.0f}",
                    f"{cpu:,.0f}",
                    f"{wall / app:.2f}",
                    f"{cpu / app_cpu:.2f}",
                    f"{wall / cpu:.2f}",
                ]
            )
    report.table(
        "Lifecycles per second, one thread: the ledger (as it is, before pooled "
        "calls, and on the previous path) and the library's Application doing the "
        "same saves and gets, per second of wall time and per second of the "
        "process's CPU time, and the ratio of each to the Application",
        [
            "where",
            "code",
            "wall /s",
            "CPU /s",
            "wall / Application",
            "CPU / Application",
            "CPU busy (wall / CPU rate)",
        ],
        rows,
        align="llrrrrr",
    )
    count = 5 if args.quick else 100
    with tempfile.TemporaryDirectory(
        dir="/dev/shm" if Path("/dev/shm").is_dir() else None, prefix="bench-"
    ) as tmp:
        (new_all, new_events) = encodings_per_lifecycle(Path(tmp), False, count)
        (old_all, old_events) = encodings_per_lifecycle(Path(tmp), True, count)
        enc = encoders(Path(tmp), 3 if args.quick else 7)
        parts, prof = profile(Path(tmp), 30 if args.quick else 300) if args.profile else ([], "")
        handed = hand_offs(Path(tmp), 20 if args.quick else 300) if args.profile else []
    report.table(
        "Canonical encodings per lifecycle (counted over the run)",
        ["path", "encodings", "of event bodies", "by the rfc8785 package"],
        [
            ["previous", f"{old_all:.0f}", f"{old_events:.0f}", f"{old_all:.0f}"],
            ["new", f"{new_all:.0f}", f"{new_events:.0f}", "0"],
        ],
        align="lrrr",
    )
    report.table(
        "The encoders alone, on a lifecycle's event bodies (encodings per second)",
        ["event", "rfc8785 package", "canonical_json", "ratio"],
        [[k, f"{a:,.0f}", f"{b:,.0f}", f"{b / a:.1f}"] for k, a, b in enc],
        align="lrrr",
    )
    if parts:
        report.table(
            "Where a lifecycle's time goes (cProfile, new path, RAM file system; "
            "the profiler inflates small calls)",
            ["part", "ms per lifecycle", "share"],
            parts,
            align="lrr",
        )
    if handed:
        report.table(
            "The executor call's hand-off, RAM file system (wall time per "
            "lifecycle waiting for another thread to take the call and for "
            "the answer to come back; load average now "
            + " / ".join(f"{x:.1f}" for x in os.getloadavg())
            + ")",
            ["code", "wall ms", "CPU ms", "executor ms", "hand-off ms", "hand-off / wall"],
            handed,
            align="lrrrrr",
        )
    if prof:
        report.add(
            f"### cProfile of the new path, RAM file system (tottime)\n\n```\n{prof.strip()}\n```"
        )
        print(prof)
    report.write(
        INTRO.format(
            samples=samples,
            per_sample=per_sample,
            disk=figures.get(places[0][0], float("nan")),
            ram=figures.get(places[1][0], float("nan")),
            disk_cpu=figures.get(places[0][0] + " cpu", float("nan")),
            ram_cpu=figures.get(places[1][0] + " cpu", float("nan")),
            disk_gain=figures.get(places[0][0] + " gain", float("nan")),
            ram_gain=figures.get(places[1][0] + " gain", float("nan")),
            disk_gain_cpu=figures.get(places[0][0] + " gain cpu", float("nan")),
            ram_gain_cpu=figures.get(places[1][0] + " gain cpu", float("nan")),
            load=" / ".join(f"{x:.1f}" for x in os.getloadavg()),
            load_at_start=load_at_start,
            command=" ".join([".venv/bin/python", "bench/bench_application.py", *sys.argv[1:]]),
        )
    )


INTRO = """
Command: `{command}`.

Median of {samples} samples of {per_sample} lifecycles per row, samples taken
in turn, one thread, each row on its own SQLite file in the same directory;
load average (1/5/15 min) at the start: {load_at_start}, at the end: {load}.
Both stores are the library's SQLite datastore with its defaults (WAL,
`synchronous=FULL`; the ledger's durability by need relaxes its non-durable
commits to `NORMAL`).

**Ledger / Application: {disk:.2f}x on the repository's disk, {ram:.2f}x on a RAM
file system by wall time; {disk_cpu:.2f}x and {ram_cpu:.2f}x by CPU time (target >= 1.0x).**
Pooled executor calls and one spec validation against the code before them,
side by side: {disk_gain:.2f}x / {ram_gain:.2f}x by wall time, {disk_gain_cpu:.2f}x /
{ram_gain_cpu:.2f}x by CPU time (disk / RAM).

What the rows compare: the Application does 17 gets and 6 saves and nothing
else. A ledger lifecycle does the same reads (fewer, with the read cache) plus
lookups and version checks; its commits also write the head index, lookups
and due items and check read sets; it checks authorization twice; and its
executor call runs on another thread so that a deadline can abandon it. That
thread was started and joined for every call (a thread start, a hand-shake
and a join, each a wait to be scheduled on a loaded machine: why the ledger's
CPU-busy share was lower than the Application's); calls now go to long-lived
pooled threads, one hand-off and one wake-up per call. The stored spec was
validated three times per lifecycle (propose, approve, recheck); now the
approval and the recheck take back, by its payload hash, the spec this process
validated when it was proposed (another process validates it once).

One-pass hashing (the "previous path" row is the code before it): each event
is encoded once, so a lifecycle encodes 7 event bodies instead of 10, and
every encoding goes through the C encoder (tables below).
"""


if __name__ == "__main__":
    main()
