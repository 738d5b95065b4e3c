"""Protocol cost on DynamoDB: requests, items and capacity units per attempt.

For one attempt's happy path (approval, then the worker woken by the stream
record) and for each recovery path (a missed stream record, a crash after the
lease, after the dispatch marker in each delivery mode, after the effect),
counted on a real boto3 client against ministack: requests by operation,
items written and read, and the write/read units DynamoDB would bill,
computed from the item sizes in the request and response payloads (see
``harness.CapacityMeter`` for the rules). Counts do not depend on the machine.

Run: ``.venv/bin/python bench/bench_protocol.py [--quick]``.
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import projector_before
from harness import (
    CAPABILITY,
    CapacityMeter,
    Emulator,
    Lifecycle,
    Report,
    Usage,
    dynamodb_store,
    parse_args,
    sqlite_store,
)

from adapters.aws_lambda.projector import project_batch
from adapters.aws_lambda.webhooks import record_batch
from adapters.dynamodb.known_versions import KnownVersions
from adapters.dynamodb.views import DynamoDBViewStore
from adapters.executors.fake import fake_build_digest
from adapters.system import ManualClock
from domain.attempt import AttemptStatus, ExecutionAttempt, Resolution
from domain.notifications import NotificationType
from domain.services.approval import approve
from domain.services.execution import CrashPoint, SimulatedCrash, Worker, WorkerPolicy
from domain.services.read_cache import DEFAULT_ENTRIES, ReadCache
from domain.services.recovery import run_recovery
from domain.services.resolution import resolve
from projections.projector import Projector
from projections.webhooks import WebhookNotifier
from tests.support.aws_lambda import FakeLambdaContext, StreamTap
from tests.support.faults import recorder_reads
from tests.support.worlds.execution import CrashAfterEffect, CrashAt

# us-east-1 on-demand, standard table class; see bench/CAPACITY.md for the source and date.
PRICE_PER_MILLION_WRU = 0.625
PRICE_PER_MILLION_RRU = 0.125
LEASE = 60
LIFECYCLES = 10  # attempts per deployed-shape run (the count is per attempt)
QUICK_LIFECYCLES = 2  # --quick
ESM_BATCH = 100  # the event source mappings' BatchSize (infra/template.yaml)
SUBSCRIPTION = frozenset(
    {
        NotificationType.ATTEMPT_SUCCEEDED,
        NotificationType.ATTEMPT_FAILED_SAFE,
        NotificationType.PROPOSAL_DECLINED,
    }
)


class World:
    """A fresh table, a metered client, a directory and a manual clock.

    ``cache_entries=0``: the read cache off, so every read is the previous code's."""

    def __init__(self, emulator: Emulator, cache_entries: int = DEFAULT_ENTRIES) -> None:
        self.client = emulator.client()
        self.meter = CapacityMeter(self.client)
        self.table = emulator.table(self.client)
        self.store = dynamodb_store(self.client, self.table)
        self.clock = ManualClock()
        self.life = Lifecycle(
            self.store, clock=self.clock, lease_seconds=LEASE, cache_entries=cache_entries
        )
        self.views = DynamoDBViewStore(self.client, self.table)
        self.projector = Projector(self.store, self.views)

    def approved(self, capability: str = CAPABILITY, simulate: str = "success") -> str:
        _, token = self.life.propose_and_present(0, capability, simulate)
        return self.life.approve(token)

    def crash(self, attempt_id: str, point: CrashPoint) -> None:
        try:
            self.life.worker(crash_hook=CrashAt(point)).process(attempt_id)
        except SimulatedCrash:
            return
        raise AssertionError("the worker did not crash")

    def status(self, attempt_id: str) -> str:
        attempt = self.store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None
        return attempt.status.value

    def close(self) -> None:
        self.client.delete_table(TableName=self.table)
        self.client.close()


def row(path: str, step: str, used: Usage, outcome: str) -> list[Any]:
    return [
        path,
        step,
        used.ops(),
        used.writes,
        used.consistent_reads,
        used.items_written,
        used.condition_checks,
        used.items_read,
        f"{used.wcu:g}",
        f"{used.gsi_wcu:g}",
        f"{used.rcu:g}",
        outcome,
    ]


HEADERS = [
    "path",
    "step",
    "requests by operation",
    "write requests",
    "consistent reads",
    "items written",
    "condition checks",
    "items read",
    "WCU",
    "GSI WCU",
    "RCU",
    "outcome",
]


def happy_path(emulator: Emulator) -> tuple[list[list[Any]], dict[str, Any]]:
    w = World(emulator)
    rows: list[list[Any]] = []
    steps: dict[str, Any] = {}
    try:
        with w.meter.measure() as used:
            _proposal_id, token = w.life.propose_and_present()
        rows.append(row("happy", "propose + present (before the attempt)", used, "presented"))
        steps["propose+present"] = used
        with w.meter.measure() as used:
            attempt_id = w.life.approve(token)
        rows.append(row("happy", "approval", used, "queued"))
        steps["approval"] = used
        with w.meter.measure() as used:
            outcome = w.life.worker().process(attempt_id)
        rows.append(row("happy", "worker (stream record)", used, outcome.value))
        steps["worker"] = used
        with w.meter.measure() as used:
            w.projector.project_attempt(attempt_id)
        rows.append(row("happy", "status projection (per stream batch)", used, "view written"))
        steps["projection"] = used
        total = steps["approval"] + steps["worker"]
        rows.append(row("happy", "**attempt total (approval + worker)**", total, ""))
        steps["attempt"] = total
    finally:
        w.close()
    return rows, steps


def side_by_side(emulator: Emulator) -> tuple[list[list[Any]], dict[str, Usage]]:
    """One lifecycle with the read cache off (the previous reads) and on, same run.

    Each world first runs one unmeasured lifecycle: the process has served this
    actor before. "cold worker" is a worker with a cache of its own that holds
    nothing (a fresh Lambda container): what it reads is what ``Queued`` lacks."""
    rows: list[list[Any]] = []
    found: dict[str, Usage] = {}
    for label, entries in (
        ("before: read cache off (the previous reads)", 0),
        ("after: read cache on", DEFAULT_ENTRIES),
    ):
        w = World(emulator, cache_entries=entries)
        try:
            w.life.run()
            with w.meter.measure() as proposing:
                _, token = w.life.propose_and_present()
            with w.meter.measure() as approving:
                attempt_id = w.life.approve(token)
            with w.meter.measure() as working:
                outcome = w.life.worker().process(attempt_id)
            assert outcome.value == "succeeded", outcome
            # cold: the approval and the worker each in a process that has cached
            # nothing (a fresh Lambda container), the presentation in another
            _, token = w.life.propose_and_present()
            with w.meter.measure() as cold_approving:
                attempt_id = approve(
                    replace(w.life.ctx, cache=ReadCache(entries)),
                    token=token,
                    provenance=w.life.who(0),
                ).attempt_id
            cold = Worker(
                replace(w.life.ctx, cache=ReadCache(entries)), WorkerPolicy(lease_seconds=LEASE)
            )
            with w.meter.measure() as cold_working:
                assert cold.process(attempt_id).value == "succeeded"
        finally:
            w.close()
        lifecycle = proposing + approving + working
        cold_lifecycle = proposing + cold_approving + cold_working
        key = "before" if entries == 0 else "after"
        found[key], found[key + "_cold"] = lifecycle, cold_working
        found[key + "_cold_approval"], found[key + "_cold_lifecycle"] = (
            cold_approving,
            cold_lifecycle,
        )
        rows.append(
            [
                label,
                proposing.total,
                approving.total,
                working.total,
                f"**{lifecycle.total}**",
                lifecycle.ops(),
                approving.consistent_reads,
                f"**{working.consistent_reads}**",
                cold_working.consistent_reads,
                cold_working.ops(),
                cold_approving.ops(),
                f"**{cold_lifecycle.total}**",
                f"{lifecycle.rcu:g}",
                f"{lifecycle.wcu:g}",
            ]
        )
    return rows, found


SIDE_HEADERS = [
    "reads",
    "propose + present",
    "approval",
    "worker",
    "lifecycle requests",
    "lifecycle requests by operation",
    "approval consistent reads",
    "worker consistent reads",
    "cold worker consistent reads",
    "cold worker requests",
    "cold approval requests",
    "cold lifecycle requests",
    "lifecycle RCU",
    "lifecycle WCU",
]


def sqlite_side_by_side() -> list[list[Any]]:
    """Store reads of one lifecycle on SQLite (a file), read cache off and on."""
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, entries in (
            ("before: read cache off (the previous reads)", 0),
            ("after: read cache on", DEFAULT_ENTRIES),
        ):
            store = sqlite_store(str(Path(tmp) / f"ledger-{entries}.db"))
            life = Lifecycle(store, cache_entries=entries)
            life.run()  # this process has served the actor before
            with recorder_reads(store.recorder) as proposing:
                _, token = life.propose_and_present()
            with recorder_reads(store.recorder) as approving:
                attempt_id = life.approve(token)
            with recorder_reads(store.recorder) as working:
                assert life.worker().process(attempt_id).value == "succeeded"
            attempt_id = life.approve(life.propose_and_present()[1])
            cold = Worker(
                replace(life.ctx, cache=ReadCache(entries)), WorkerPolicy(lease_seconds=LEASE)
            )
            with recorder_reads(store.recorder) as cold_working:
                assert cold.process(attempt_id).value == "succeeded"
            store.recorder.close()
            total = sum((proposing + approving + working).values())
            rows.append(
                [
                    label,
                    sum(proposing.values()),
                    sum(approving.values()),
                    sum(working.values()),
                    f"**{total}**",
                    sum(cold_working.values()),
                ]
            )
    return rows


class Deployed:
    """One attempt's requests from approval to result as deployed on AWS: the
    approval, the worker, and the projector and webhook Lambdas fed the table's
    own stream records (as their event source mappings deliver them: INSERTs of
    attempt and proposal events, at most ``ESM_BATCH`` a batch) with one
    ``[[webhook]]`` subscription. ``before``: the handlers' batch code before
    batching (``projector_before``)."""

    def __init__(self, emulator: Emulator, before: bool) -> None:
        self.w = World(emulator)
        self.before = before
        self.views = self.w.views
        if before:  # the view store before it knew what it had written
            self.views.known = KnownVersions(size=0)
        self.notifier = WebhookNotifier(
            self.w.store, self.views, "bench", SUBSCRIPTION, None, now=self.w.clock.now
        )
        arn = self.w.client.describe_table(TableName=self.w.table)["Table"]["LatestStreamArn"]
        self.tap = StreamTap(emulator.streams_client(), arn)
        self.seen: set[str] = set()
        self.work, self.projector, self.fold = Usage(), Usage(), Usage()
        self.fresh()  # the directory's records: written before, never delivered
        self.deliver(self.lifecycle(), measured=False)  # this container has run before

    def fresh(self) -> list[dict[str, Any]]:
        """Stream records written since the last look that the mappings deliver."""
        found = [r for r in self.tap.records() if r["dynamodb"]["SequenceNumber"] not in self.seen]
        self.seen.update(r["dynamodb"]["SequenceNumber"] for r in found)
        return [
            r
            for r in found
            if r.get("eventName") == "INSERT"
            and r["dynamodb"]["Keys"]["pk"]["S"].startswith(("att_", "prop_"))
        ]

    def lifecycle(self, measured: bool = False) -> list[dict[str, Any]]:
        """Propose and present (their records delivered, not counted), then the
        approval and the worker; returns the records from approval to result."""
        _, token = self.w.life.propose_and_present()
        self.deliver(self.fresh(), measured=False)
        with self.w.meter.measure() as used:
            attempt_id = self.w.life.approve(token)
            assert self.w.life.worker().process(attempt_id).value == "succeeded"
        if measured:
            self.work += used
        return self.fresh()

    def deliver(self, records: list[dict[str, Any]], *, measured: bool = True) -> None:
        for start in range(0, len(records), ESM_BATCH):
            event = {"Records": records[start : start + ESM_BATCH]}
            with self.w.meter.measure() as projecting:
                if self.before:
                    projector_before.project_batch(self.w.projector, event)
                else:
                    project_batch(self.w.projector, event, FakeLambdaContext())
            with self.w.meter.measure() as folding:
                if self.before:
                    projector_before.record_batch([self.notifier], self.views, event)
                else:
                    record_batch(
                        [self.notifier], self.w.store, self.views, event, FakeLambdaContext()
                    )
            if measured:
                self.projector += projecting
                self.fold += folding

    def run(self, shape: str, lifecycles: int) -> None:
        held: list[dict[str, Any]] = []
        for _ in range(lifecycles):
            records = self.lifecycle(measured=True)
            if shape == "record":
                for record in records:
                    self.deliver([record])
            elif shape == "lifecycle":
                self.deliver(records)
            else:
                held += records
        self.deliver(held)


DEPLOYED_SHAPES = [
    ("record", "one record per batch (the smallest batches)"),
    ("lifecycle", "one lifecycle per batch (approval to result within the batching window)"),
    ("all", "{n} lifecycles per batch (under load)"),
]


def per_attempt(used: Usage, lifecycles: int) -> str:
    return f"{used.total / lifecycles:g}"


def deployed_rows(
    emulator: Emulator, lifecycles: int
) -> tuple[list[list[Any]], dict[str, tuple[Usage, Usage]]]:
    """Before and after batching, every batch shape, in the same run."""
    rows: list[list[Any]] = []
    totals: dict[str, tuple[Usage, Usage]] = {}
    for shape, label in DEPLOYED_SHAPES:
        found: list[Usage] = []
        for before in (True, False):
            run = Deployed(emulator, before)
            try:
                run.run(shape, lifecycles)
            finally:
                run.w.close()
            total = run.work + run.projector + run.fold
            found.append(total)
            rows.append(
                [
                    label.format(n=lifecycles),
                    "before" if before else "after",
                    per_attempt(run.work, lifecycles),
                    per_attempt(run.projector, lifecycles),
                    per_attempt(run.fold, lifecycles),
                    f"**{per_attempt(total, lifecycles)}**",
                    total.ops(),
                    f"{(total.wcu + total.gsi_wcu) / lifecycles:g}",
                    f"{total.rcu / lifecycles:g}",
                ]
            )
        totals[shape] = (found[0], found[1])
    return rows, totals


def deployed_headers(lifecycles: int) -> list[str]:
    return [
        "stream batches",
        "code",
        "approval + worker",
        "projector",
        "webhook fold",
        "requests per attempt",
        f"requests by operation ({lifecycles} attempts)",
        "WRU per attempt",
        "RRU per attempt",
    ]


def recovery_paths(emulator: Emulator, quick: bool) -> list[list[Any]]:
    rows: list[list[Any]] = []

    def tick(w: World, path: str, attempt_id: str, advance: float) -> None:
        w.clock.advance(advance)
        with w.meter.measure() as used:
            report = run_recovery(w.life.worker())
        assert report.examined == 1, report
        rows.append(row(path, "recovery tick", used, w.status(attempt_id)))

    cases: list[tuple[str, str, str, CrashPoint | None]] = [
        ("(a) stream record missed", CAPABILITY, "success", None),
        ("(b) crash after lease, before marker", CAPABILITY, "success", CrashPoint.AFTER_LEASE),
        (
            "(c) crash after marker: provider_idempotency",
            CAPABILITY,
            "success",
            CrashPoint.AFTER_DISPATCH_MARKER,
        ),
        (
            "(c) crash after marker: correlation_lookup",
            "fake.correlation_lookup",
            "success",
            CrashPoint.AFTER_DISPATCH_MARKER,
        ),
        (
            "(c) crash after marker: operator_only",
            "fake.operator_only",
            "success",
            CrashPoint.AFTER_DISPATCH_MARKER,
        ),
        (
            "(e) crash after response, before result: provider_idempotency",
            CAPABILITY,
            "success",
            CrashPoint.AFTER_RESPONSE,
        ),
    ]
    for path, capability, simulate, point in cases[:2] if quick else cases:
        w = World(emulator)
        try:
            attempt_id = w.approved(capability, simulate)
            if point is None:
                tick(w, path, attempt_id, 1)
            else:
                w.crash(attempt_id, point)
                tick(w, path, attempt_id, LEASE + 1)
        finally:
            w.close()

    if quick:
        return rows
    # (d) the effect applied, the response lost: correlation lookup finds it.
    w = World(emulator)
    try:
        capability = "fake.correlation_lookup"
        current = w.life.registry.get(capability, fake_build_digest(capability))
        w.life.registry.replace(CrashAfterEffect(current))
        attempt_id = w.approved(capability)
        with contextlib.suppress(SimulatedCrash):
            w.life.worker().process(attempt_id)
        tick(w, "(d) crash after effect: correlation_lookup", attempt_id, LEASE + 1)
    finally:
        w.close()

    # An operator-only uncertainty settled by an admin.
    w = World(emulator)
    try:
        attempt_id = w.approved("fake.operator_only")
        w.crash(attempt_id, CrashPoint.AFTER_DISPATCH_MARKER)
        w.clock.advance(LEASE + 1)
        run_recovery(w.life.worker())
        attempt = w.store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None and attempt.status is AttemptStatus.OUTCOME_UNKNOWN
        with w.meter.measure() as used:
            resolve(
                w.life.ctx,
                attempt_id=attempt_id,
                expected_revision=attempt.version,
                outcome=Resolution.NO_EFFECT,
                reason="checked with the provider",
                resolved_by="ops",
            )
        rows.append(row("admin resolve of outcome_unknown", "resolve", used, w.status(attempt_id)))
        # An empty tick: what recovery costs when nothing is due.
        w.clock.advance(LEASE + 1)
        with w.meter.measure() as used:
            run_recovery(w.life.worker())
        rows.append(row("recovery tick, nothing due", "recovery tick", used, "-"))
    finally:
        w.close()
    return rows


def cost_rows(steps: dict[str, Usage]) -> list[list[Any]]:
    attempt, projection = steps["attempt"], steps["projection"]
    before = steps["propose+present"]
    rows = []
    for name, wru, rru in [
        ("attempt (approval + worker)", attempt.wcu + attempt.gsi_wcu, attempt.rcu),
        (
            "attempt + status projection",
            attempt.wcu + attempt.gsi_wcu + projection.wcu + projection.gsi_wcu,
            attempt.rcu + projection.rcu,
        ),
        (
            "propose + present + attempt + projection",
            attempt.wcu
            + attempt.gsi_wcu
            + projection.wcu
            + projection.gsi_wcu
            + before.wcu
            + before.gsi_wcu,
            attempt.rcu + projection.rcu + before.rcu,
        ),
    ]:
        dollars = wru * PRICE_PER_MILLION_WRU + rru * PRICE_PER_MILLION_RRU
        rows.append(
            [
                name,
                f"{wru:g}",
                f"{rru:g}",
                f"${wru * PRICE_PER_MILLION_WRU:,.2f}",
                f"${rru * PRICE_PER_MILLION_RRU:,.2f}",
                f"**${dollars:,.2f}**",
            ]
        )
    return rows


def main() -> None:
    args = parse_args(__doc__ or "")
    report = Report("bench_protocol", args.quick)
    with Emulator() as emulator:
        happy, steps = happy_path(emulator)
        report.table("Happy path of one attempt", HEADERS, happy, align="lllrrrrrrrrl")
        compared, counts = side_by_side(emulator)
        report.table(
            "Worker reads and requests per lifecycle: read cache off and on (same run)",
            SIDE_HEADERS,
            compared,
            align="lrrrrlrrrllrrr",
        )
        lifecycles = QUICK_LIFECYCLES if args.quick else LIFECYCLES
        deployed, deployed_totals = deployed_rows(emulator, lifecycles)
        report.table(
            "Approval to result as deployed, with the projector and the webhook fold: "
            "before and after batching per stream batch (same run; requests per attempt)",
            deployed_headers(lifecycles),
            deployed,
            align="llrrrrlrr",
        )
        sqlite_rows = sqlite_side_by_side()
        report.table(
            "SQLite reads per lifecycle: read cache off and on (same run; one SELECT each)",
            [
                "reads",
                "propose + present",
                "approval",
                "worker",
                "lifecycle reads",
                "cold worker reads",
            ],
            sqlite_rows,
            align="lrrrrr",
        )
        recovery = recovery_paths(emulator, args.quick)
        report.table(
            "Recovery paths (the tick that recovers one attempt; the first, crashed "
            "run is not counted)",
            HEADERS,
            recovery,
            align="lllrrrrrrrrl",
        )
    report.table(
        "On-demand cost per million attempts (table + GSI write units; read units)",
        [
            "scope",
            "WRU per attempt",
            "RRU per attempt",
            "writes $/M",
            "reads $/M",
            "total $/M attempts",
        ],
        cost_rows(steps),
        align="lrrrrr",
    )
    worker = steps["worker"]
    report.write(
        INTRO.format(
            approval_writes=steps["approval"].writes,
            worker_writes=worker.writes,
            before=counts["before"].total,
            after=counts["after"].total,
            before_worker=counts["before_cold"].consistent_reads,
            after_worker=worker.consistent_reads,
            cold_worker=counts["after_cold"].consistent_reads,
            cold_before=counts["before_cold_lifecycle"].total,
            cold_after=counts["after_cold_lifecycle"].total,
            cold_approval_before=counts["before_cold_approval"].ops(),
            cold_approval_after=counts["after_cold_approval"].ops(),
            cold_rcu_before=counts["before_cold_approval"].rcu,
            cold_rcu_after=counts["after_cold_approval"].rcu,
            sqlite_before=sqlite_rows[0][4].strip("*"),
            sqlite_after=sqlite_rows[1][4].strip("*"),
            deployed_before=per_attempt(deployed_totals["lifecycle"][0], lifecycles),
            deployed_after=per_attempt(deployed_totals["lifecycle"][1], lifecycles),
            loaded_before=per_attempt(deployed_totals["all"][0], lifecycles),
            loaded_after=per_attempt(deployed_totals["all"][1], lifecycles),
            single_before=per_attempt(deployed_totals["record"][0], lifecycles),
            single_after=per_attempt(deployed_totals["record"][1], lifecycles),
            lifecycles=lifecycles,
            wru=PRICE_PER_MILLION_WRU,
            rru=PRICE_PER_MILLION_RRU,
        )
    )


INTRO = """
Requests counted with botocore event hooks on the client the ledger uses,
against ministack; capacity units computed from the item sizes in the request
and response payloads with DynamoDB's published rules: 1 WCU per KB written
per item, doubled for items in a transaction (a `ConditionCheck` billed as a
transactional write of the checked item, 2 WCU); 1 RCU per 4 KB strongly
consistent (a Query rounds up its total, a missing item still costs 1); an
eventually consistent GSI query half of that; index maintenance as "GSI WCU"
(a new `due` entry 1, a moved one 2: delete and put, a removed one 1). These
are counts: they do not depend on the machine. Prices: ${wru} per million
write request units and ${rru} per million read request units (us-east-1,
on-demand, standard table class; see bench/CAPACITY.md for the source).

**Writes.** The happy path is {approval_writes} write request for the approval
and {worker_writes} for the worker: the lease, the dispatch marker and the
result, each one `TransactWriteItems` (the event, its stream's head-index
entry and its due-work entry, and for the marker the condition checks on the
directory records), so **4 write requests per attempt**, as targeted. With
the head index no event is a one-item write: a lone event (the proposal's
first) is a two-item transaction, the event and its stream's head. The
status projection adds one guarded `TransactWriteItems` per stream batch (the
status row and its find rows; on AWS the projector runs on the stream, off the
attempt's path).

**Reads: the worker makes {after_worker} strongly consistent read per attempt
(before the read cache: {before_worker}); a worker that has cached nothing
makes {cold_worker}; target at most 2.** The one read is the attempt stream (a
stream record is only a hint). The approved spec and the approval's read set
(each directory record's stream and version) are stored on `Queued`, so the
recheck reads no proposal, takes the directory records from the read cache,
and reads the versions it lacks in one consistent `BatchGetItem`. Its verdict
is then sealed by the dispatch marker, which condition-checks every record at
the version used: a record changed since makes the marker fail, the entries
are dropped and the recheck runs again on fresh reads (docs/read-cache.md).
**A whole lifecycle (propose, present, approve, worker) is {after} requests,
target at most 10 (before: {before}).** Approval reads the token lookup and
nothing else: the proposal comes from the cache (written through by
`present`) and so do the directory records; its claim commit checks them all.
**Cold** (the approval and the worker each in a process that has cached
nothing, as a fresh Lambda container is): {cold_after} requests per lifecycle
(read cache off: {cold_before}). A cold approval reads the proposal stream and
then the directory records it lacks in two consistent `BatchGetItem`s: their
head-index entries (each written in the same transaction as its stream's
newest event, so it names that event's version), then the events at those
versions ({cold_approval_after}; before, a `Query` per record:
{cold_approval_before}). A stream without a head-index entry (written before
the index) is read by a `Query` of its own. A `BatchGetItem` bills each item
(at least 1 RCU) where a `Query` rounds its total, so a cold approval reads
{cold_rcu_after:g} RCU instead of {cold_rcu_before:g}: a few read units, at a fifth of a
write unit's price, for four fewer round trips.
The happy-path table below is with the read cache on. **On SQLite a
lifecycle makes {sqlite_after} store reads, target at most 6 (before:
{sqlite_before}).**

**As deployed, approval to result with the projector and the webhook fold:
{deployed_after} requests per attempt, target at most 12 (before batching:
{deployed_before})**, when the event source mapping delivers a lifecycle in
one batch (its 1 s batching window). The approval and the worker make 6 of
them; the projector reads each stream of a batch once (the attempt and its
proposal) and writes the rows of every stream of the batch together (the
status row, its find rows, the inbox and watch rows) in one guarded
`TransactWriteItems` per 100 rows, where before each stream was written on its
own (a `PutItem` for the status row and a `TransactWriteItems` for its find
rows; a `PutItem` each for a proposal's inbox and watch rows). The webhook fold
reads each stream once for every subscription (a stream no subscription can
use is not read) and writes the batch's delivery records together. Under load
({lifecycles} lifecycles in one batch) an attempt costs {loaded_after}
(before: {loaded_before}); in the smallest batches (one record each, a stream
read once per record) {single_after} (before: {single_before}). Counted on the
same metered client ({lifecycles} attempts a run, after one that is not
counted); the webhook sends are not counted (they depend on the receiver).

The recovery tick adds one consistent `GetItem` of the table's layout record
(the due-bucket count, read as stored at every page) and 256 eventually
consistent queries of the `due` index, one per bucket the table records (a
table that records none: 16 by default, `LEDGER_DUE_WORK_BUCKETS`), whatever
the number of attempts (130 RCU when nothing is due, 9 with 16 buckets): see
bench_recovery.md. It is a tick's cost, shared by every attempt the tick
recovers; the happy path reads no due bucket.
"""


if __name__ == "__main__":
    main()
