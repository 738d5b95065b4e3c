"""Load with crashes: N proposals x 25 concurrent approvals, 4 crashing workers.

Real threads against a real store (ministack in the tests): for each proposal
25 callers approve at once through two sibling presentations (3 of them with a
stranger's provenance), while 4 workers take the approved attempts from a
duplicating queue and crash at random at the worker's boundaries and after
the provider applied an effect. Then the clock moves past every lease and
recovery runs until nothing is left to do.

Checked: every request that claimed got the same attempt as its siblings, no
stranger got one; exactly one effect per idempotency key (and at most one
call outside provider idempotency); zero lost events (every event a commit
reported written is in the store, in its stream, once); every stream passes
the chaos oracle; every attempt ends terminal or outcome_unknown.

    python -m tests.hardening.load --proposals 100     # the full run (starts ministack)
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from adapters.executors.fake import EffectLedger, fake_build_digest, register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.store import LedgerStore
from domain.attempt import ExecutionAttempt
from domain.errors import ApprovalUnavailable, LedgerError
from domain.ports import Commit, ExecutionReceipt, ExecutionRequest
from domain.services.approval import Provenance, approve
from domain.services.execution import CrashPoint, SimulatedCrash, Worker, WorkerPolicy
from domain.services.recovery import run_recovery
from tests.support.stream_checks import check_attempt_stream
from tests.support.worlds.approval import check_approval_invariants
from tests.support.worlds.execution import LEASE, MODES, ExecutionWorld

APPROVERS = 25
STRANGERS_PER_PROPOSAL = 3
WORKERS = 4
STRANGER = Provenance("bob", "ib-bob", "cb1", "conv-1")
SIMULATE = (
    "success",
    "success",
    "success",
    "timeout_after_effect",
    "timeout_before_effect",
    "no_write_error",
    "unsafe_receipt",
)


class CountingStore:
    """Delegates to the store; remembers every event a commit reported written."""

    def __init__(self, inner: LedgerStore) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self.written: dict[tuple[str, int], str] = {}
        self.commits = 0
        self.conflicts = 0

    def commit(self, commit: Commit) -> None:
        pending = [
            (a.id, e.originator_version, type(e).__qualname__)
            for a in commit.aggregates
            for e in a.pending_events
        ]
        try:
            self.inner.commit(commit)
        except LedgerError:
            with self._lock:
                self.conflicts += 1
            raise
        with self._lock:
            self.commits += 1
            for stream_id, version, kind in pending:
                assert (stream_id, version) not in self.written, "a slot was written twice"
                self.written[(stream_id, version)] = kind

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Crashes:
    """Seeded crash decisions shared by every worker thread.

    The first time a worker reaches each boundary it crashes there, so every
    boundary is exercised however small the run; after that, at ``rate``.
    """

    def __init__(self, seed: int, rate: float) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.rate = rate
        self.fired: Counter[str] = Counter()
        self._reached: set[str] = set()

    def roll(self, where: str) -> bool:
        with self._lock:
            hit = where not in self._reached or self._rng.random() < self.rate
            self._reached.add(where)
            if hit:
                self.fired[where] += 1
            return hit

    def hook(self, point: CrashPoint, attempt_id: str) -> None:
        if self.roll(point.value):
            raise SimulatedCrash(point.value)


class CrashingExecutor:
    """Boundary (d): the provider applies the effect, then the worker dies."""

    def __init__(self, inner: Any, crashes: Crashes) -> None:
        self.inner = inner
        self.crashes = crashes
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        receipt: ExecutionReceipt = self.inner.execute(request)
        if self.crashes.roll("after_effect"):
            raise SimulatedCrash("after_effect")
        return receipt


@dataclass
class LoadReport:
    """What one load run did and found."""

    proposals: int = 0
    approval_requests: int = 0
    accepted: int = 0
    refused: int = 0
    attempts: int = 0
    worker_steps: int = 0
    worker_crashes: int = 0
    recovery_ticks: int = 0
    commits: int = 0
    conflicts: int = 0
    events_written: int = 0
    events_found: int = 0
    effects: int = 0
    calls: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    crashes: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        return [
            f"proposals {self.proposals}, approval requests {self.approval_requests} "
            f"(202: {self.accepted}, refused: {self.refused}), attempts {self.attempts}",
            f"worker steps {self.worker_steps} ({self.worker_crashes} crashed: "
            f"{dict(sorted(self.crashes.items()))}), recovery ticks {self.recovery_ticks}",
            f"commits {self.commits} (+{self.conflicts} lost races), events written "
            f"{self.events_written}, found {self.events_found}, lost "
            f"{self.events_written - self.events_found}",
            f"effects {self.effects} over {self.calls} executor calls; "
            f"final {dict(sorted(self.statuses.items()))}; {self.seconds:.1f}s",
        ]


def run_load(
    store: LedgerStore, *, proposals: int, seed: int = 7, crash_rate: float = 0.08
) -> LoadReport:
    started = time.monotonic()
    rng = random.Random(seed)
    report = LoadReport(proposals=proposals)
    counting = CountingStore(store)
    registry = StaticExecutorRegistry()
    effects: EffectLedger = register_fakes(registry)
    world = ExecutionWorld(counting, registry=registry, effects=effects)  # type: ignore[arg-type]
    crashes = Crashes(seed, crash_rate)
    for capability in MODES.values():
        world.swap_executor(capability, lambda inner: CrashingExecutor(inner, crashes))
    policy = WorkerPolicy(lease_seconds=LEASE)

    work: queue.Queue[str | None] = queue.Queue()
    worker_lock = threading.Lock()

    def worker_loop() -> None:
        worker = Worker(world.ctx, policy, crash_hook=crashes.hook)
        while True:
            attempt_id = work.get()
            if attempt_id is None:
                return
            try:
                worker.process(attempt_id)
            except SimulatedCrash:
                with worker_lock:
                    report.worker_crashes += 1
            with worker_lock:
                report.worker_steps += 1

    workers = [
        threading.Thread(target=worker_loop, name=f"load-worker-{i}") for i in range(WORKERS)
    ]
    for thread in workers:
        thread.start()

    proposal_ids: list[str] = []
    attempt_of: dict[str, str] = {}
    try:
        with ThreadPoolExecutor(APPROVERS) as pool:
            for number in range(proposals):
                mode = rng.choice(sorted(MODES))
                capability = MODES[mode]
                proposal_id = world.propose(
                    capability=capability,
                    executor_build=fake_build_digest(capability),
                    content={"n": number, "simulate": rng.choice(SIMULATE)},
                )
                proposal_ids.append(proposal_id)
                tokens = [world.present(proposal_id).token for _ in range(2)]
                barrier = threading.Barrier(APPROVERS)
                callers = [STRANGER] * STRANGERS_PER_PROPOSAL + [world.who] * (
                    APPROVERS - STRANGERS_PER_PROPOSAL
                )
                rng.shuffle(callers)

                def press(job: tuple[str, Provenance, threading.Barrier]) -> str | None:
                    token, who, start = job
                    start.wait()
                    try:
                        return approve(world.ctx, token=token, provenance=who).attempt_id
                    except ApprovalUnavailable:
                        return None

                answers = list(
                    pool.map(
                        press, [(tokens[i % 2], who, barrier) for i, who in enumerate(callers)]
                    )
                )
                report.approval_requests += len(answers)
                for who, answer in zip(callers, answers, strict=True):
                    if answer is None:
                        report.refused += 1
                        assert who == STRANGER, "a rightful approval was refused"
                        continue
                    assert who != STRANGER, "a stranger's approval was accepted"
                    report.accepted += 1
                    work.put(answer)  # a stream record per answer: duplicates galore
                claimed = {a for a in answers if a is not None}
                assert len(claimed) == 1, claimed
                attempt_of[proposal_id] = claimed.pop()
    finally:
        for _ in workers:
            work.put(None)
        for thread in workers:
            thread.join()

    # recovery: move past every lease, tick until nothing is left
    recovery = Worker(world.ctx, policy)
    for _ in range(policy.max_predispatch_leases + policy.max_dispatches + 4):
        statuses = [world.attempt(a).status.value for a in attempt_of.values()]
        if all(s not in ("queued", "executing") for s in statuses):
            break
        world.clock.advance(max(LEASE, policy.backoff_max_seconds) + 1)
        tick = run_recovery(recovery)
        assert not tick.outcomes.get("error"), tick
        report.recovery_ticks += 1

    report.attempts = len(attempt_of)
    check_approval_invariants(store, proposal_ids, world.clock.now())
    found = 0
    for attempt_id in attempt_of.values():
        attempt = store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None
        report.statuses[attempt.status.value] += 1
        events, bad = store.audit_events(attempt_id)
        assert bad is None
        check_attempt_stream(attempt_id, events, policy)
        key = attempt.idempotency_key
        if attempt.status.value == "succeeded":
            assert effects.effect_count(key) == 1, f"{attempt_id}: succeeded without its effect"
        if attempt.status.value == "failed_safe":
            assert effects.effect_count(key) == 0, f"{attempt_id}: failed_safe with an effect"
        calls = sum(1 for _, k in effects.calls if k == key)
        if attempt.delivery_mode.value != "provider_idempotency":
            assert calls <= 1, f"{attempt_id}: {calls} calls without provider idempotency"
    streams = sorted({stream for stream, _ in counting.written})
    for stream_id in streams:
        stored = {
            (s.originator_version, s.topic.rsplit(":", 1)[-1]) for s in store.read_stream(stream_id)
        }
        for (written_stream, version), kind in counting.written.items():
            if written_stream == stream_id:
                assert (version, kind) in stored, f"lost event {stream_id} v{version} {kind}"
                found += 1
    report.events_written = len(counting.written)
    report.events_found = found
    report.commits, report.conflicts = counting.commits, counting.conflicts
    report.effects = sum(len(v) for v in effects.effects.values())
    report.calls = effects.call_count()
    report.crashes = crashes.fired
    report.seconds = time.monotonic() - started
    assert effects.max_effects_per_key() <= 1, "an idempotency key has two effects"
    unsettled = {s: n for s, n in report.statuses.items() if s in ("queued", "executing")}
    assert not unsettled, f"still unsettled after recovery: {unsettled}"
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.hardening.load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--proposals", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
    from adapters.dynamodb.schema import create_table
    from tests.support import ministack
    from tests.support.dynamodb_fixtures import ENDPOINT_ENV, new_client, new_table_name

    endpoint = os.environ.get(ENDPOINT_ENV)
    node = None if endpoint else ministack.start()
    client = new_client(endpoint or node.url, max_pool_connections=64)  # type: ignore[union-attr]
    table = new_table_name()
    try:
        create_table(client, table)
        store = LedgerStore(DynamoDBLedgerRecorder(table, client, due_buckets=4))
        report = run_load(store, proposals=args.proposals, seed=args.seed)
        print("load (DynamoDB emulator): " + "\n  ".join(report.lines()))
        return 0
    finally:
        try:
            client.delete_table(TableName=table)
        finally:
            client.close()
            if node is not None:
                node.stop()


if __name__ == "__main__":
    raise SystemExit(main())
