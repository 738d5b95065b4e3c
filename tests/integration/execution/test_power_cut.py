"""Durability by need on SQLite, proven by simulated power cuts.

The file runs in WAL mode with ``synchronous=NORMAL``: only durable commits
fsync the WAL, and one fsync covers every frame before it. What a power cut
leaves is therefore the database file plus the prefix of the WAL that the
last durable commit synced (SQLite replays the checksummed prefix on open).
``PowerCut`` records that prefix after every durable commit (a hook of the
counting recorder of tests/support) and builds that leftover state as a copy, at chosen points of
a lifecycle: right after each answer is given, during the executor call,
right after a lease. A new ledger on the copy must still hold everything that
was answered, and its recovery must never call the executor blindly.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.executors.fake import EffectLedger, register_fakes
from adapters.executors.registry import StaticExecutorRegistry
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore
from adapters.store import LedgerStore
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.ports import Commit
from domain.proposal import Proposal
from domain.services.approval import approve
from domain.services.context import ServiceContext
from domain.services.execution import CrashPoint, Worker, WorkerPolicy
from domain.services.recovery import run_recovery
from tests.support.stores import DurableCountingRecorder
from tests.support.worlds.execution import LEASE, MODES, DuringCall, ExecutionWorld


class PowerCut:
    """What survives a power cut of one SQLite file at any moment: its main
    file and the WAL prefix synced by the last durable commit."""

    def __init__(self, path: Path, recorder: DurableCountingRecorder) -> None:
        self.path = path
        self.wal = Path(f"{path}-wal")
        self.synced = 0
        self.main_file = path.read_bytes()
        self.cuts = 0
        recorder.after.append(self._synced)

    def _synced(self) -> None:
        size = self.wal.stat().st_size
        assert size >= self.synced, "the WAL restarted: this model no longer holds"
        self.synced = size

    def cut(self, into: Path) -> LedgerStore:
        """A new ledger on what the disk holds after a power cut now."""
        # No checkpoint ran (it would have synced the WAL and changed the file).
        assert self.path.read_bytes() == self.main_file
        self.cuts += 1
        folder = into / f"cut{self.cuts}"
        folder.mkdir()
        copy = folder / self.path.name
        shutil.copyfile(self.path, copy)
        with self.wal.open("rb") as wal:
            Path(f"{copy}-wal").write_bytes(wal.read(self.synced))
        recorder = SQLiteLedgerRecorder(open_datastore(str(copy)))
        recorder.create_table()
        return LedgerStore(recorder)


class NothingDurable(LedgerStore):
    """The control: a store that makes no commit durable (every commit fsync-free)."""

    def commit(self, commit: Commit) -> None:
        super().commit(replace(commit, durable=False))


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[tuple[Path, DurableCountingRecorder]]:
    path = tmp_path / "ledger.db"
    recorder = DurableCountingRecorder(open_datastore(str(path)))
    recorder.create_table()
    yield path, recorder
    recorder.close()


def world_on(store: LedgerStore) -> ExecutionWorld:
    registry = StaticExecutorRegistry()
    return ExecutionWorld(store, registry=registry, effects=register_fakes(registry))


def worker_on(store: LedgerStore, world: ExecutionWorld) -> Worker:
    """A worker of a restarted process on ``store``: same clock, executors and
    provider (the external system kept its state through the cut)."""
    ctx = ServiceContext(
        store=store,
        clock=world.clock,
        tokens=world.tokens,
        permissions=world.ctx.permissions,
        registry=world.registry,
    )
    return Worker(ctx, WorkerPolicy(lease_seconds=LEASE))


def calls(effects: EffectLedger, key: str) -> list[str]:
    return [k for _, k in effects.calls if k == key]


def test_every_answered_commit_survives_a_power_cut_right_after_its_answer(
    sqlite_file: tuple[Path, DurableCountingRecorder], tmp_path: Path
) -> None:
    path, recorder = sqlite_file
    world = world_on(LedgerStore(recorder))
    power = PowerCut(path, recorder)
    capability = MODES["provider_idempotency"]
    from adapters.executors.fake import fake_build_digest

    proposal_id = world.propose(capability=capability, executor_build=fake_build_digest(capability))
    assert power.cut(tmp_path).get(Proposal, proposal_id) is not None  # 201 kept

    token = world.present(proposal_id).token
    after_present = power.cut(tmp_path)  # 201 kept: the token still approves
    assert approve(
        worker_on(after_present, world).ctx, token=token, provenance=world.who
    ).attempt_id

    attempt_id = approve(world.ctx, token=token, provenance=world.who).attempt_id
    kept = power.cut(tmp_path).get(ExecutionAttempt, attempt_id)  # 202 kept
    assert kept is not None and kept.status is AttemptStatus.QUEUED

    world.worker().process(attempt_id)
    kept = power.cut(tmp_path).get(ExecutionAttempt, attempt_id)
    assert kept is not None and kept.status is AttemptStatus.SUCCEEDED


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_power_cut_during_the_executor_call_keeps_the_marker_and_never_redispatches_blindly(
    sqlite_file: tuple[Path, DurableCountingRecorder], tmp_path: Path, mode: str
) -> None:
    path, recorder = sqlite_file
    world = world_on(LedgerStore(recorder))
    power = PowerCut(path, recorder)
    attempt_id = world.approved(mode)
    after: list[LedgerStore] = []
    world.swap_executor(
        MODES[mode], lambda inner: DuringCall(inner, lambda: after.append(power.cut(tmp_path)))
    )
    world.worker().process(attempt_id)
    key = world.attempt(attempt_id).idempotency_key
    assert calls(world.effects, key) == [key]

    # the power went during the call: the marker is on disk, the result is not
    survivor = after[0]
    kept = survivor.get(ExecutionAttempt, attempt_id)
    assert kept is not None and kept.dispatched and kept.status is AttemptStatus.EXECUTING
    world.clock.advance(LEASE + 1)
    run_recovery(worker_on(survivor, world))
    settled = survivor.get(ExecutionAttempt, attempt_id)
    assert settled is not None
    if mode == "operator_reconciliation_only":
        assert settled.status is AttemptStatus.OUTCOME_UNKNOWN
        assert calls(world.effects, key) == [key]  # no second call
    elif mode == "correlation_lookup":
        assert settled.status is AttemptStatus.SUCCEEDED  # looked up, not called again
        assert calls(world.effects, key) == [key] and key in world.effects.lookups
    else:
        assert settled.status is AttemptStatus.SUCCEEDED
        assert calls(world.effects, key) == [key, key]  # the same key: the provider dedups
        assert world.effects.effect_count(key) == 1


def test_a_power_cut_after_a_lease_loses_the_lease_and_recovery_runs_it_once(
    sqlite_file: tuple[Path, DurableCountingRecorder], tmp_path: Path
) -> None:
    path, recorder = sqlite_file
    world = world_on(LedgerStore(recorder))
    power = PowerCut(path, recorder)
    attempt_id = world.approved("operator_reconciliation_only")
    after: list[LedgerStore] = []

    def cut_after_lease(point: CrashPoint, _: str) -> None:
        if point is CrashPoint.AFTER_LEASE and not after:
            after.append(power.cut(tmp_path))

    Worker(world.ctx, WorkerPolicy(lease_seconds=LEASE), crash_hook=cut_after_lease).process(
        attempt_id
    )
    assert world.attempt(attempt_id).status is AttemptStatus.SUCCEEDED
    # the lease was not fsynced: the cut took it back (the tail loss is real)
    survivor = after[0]
    kept = survivor.get(ExecutionAttempt, attempt_id)
    assert kept is not None and kept.version == 1 and kept.status is AttemptStatus.QUEUED
    # no call had been made before the lease was lost; recovery makes exactly one
    key = kept.idempotency_key
    assert calls(world.effects, key) == [key]  # the live process's call, after the cut
    run_recovery(worker_on(survivor, world))
    done = survivor.get(ExecutionAttempt, attempt_id)
    assert done is not None and done.status is AttemptStatus.SUCCEEDED


def test_control_a_marker_that_is_not_durable_leads_to_a_blind_duplicate(
    sqlite_file: tuple[Path, DurableCountingRecorder], tmp_path: Path
) -> None:
    """What the durable marker prevents, shown by taking it away: a worker whose
    commits are not fsynced loses its marker to the cut during the call, and
    recovery calls an operator-only executor a second time. So the checks above
    fail if the marker is not durable."""
    path, recorder = sqlite_file
    world = world_on(LedgerStore(recorder))
    power = PowerCut(path, recorder)
    attempt_id = world.approved("operator_reconciliation_only")  # durable
    after: list[LedgerStore] = []
    world.swap_executor(
        MODES["operator_reconciliation_only"],
        lambda inner: DuringCall(inner, lambda: after.append(power.cut(tmp_path))),
    )
    careless = worker_on(NothingDurable(recorder), world)
    careless.process(attempt_id)
    key = world.attempt(attempt_id).idempotency_key
    survivor = after[0]
    kept = survivor.get(ExecutionAttempt, attempt_id)
    assert kept is not None and not kept.dispatched and kept.status is AttemptStatus.QUEUED
    run_recovery(worker_on(survivor, world))
    assert calls(world.effects, key) == [key, key]  # the blind duplicate


def test_a_lifecycle_fsyncs_only_the_commits_that_answer_or_precede_a_call(
    sqlite_file: tuple[Path, DurableCountingRecorder],
) -> None:
    """Five durable commits: propose (201), present (201), approve (202), the
    dispatch marker (before the call) and the result (200 to status readers);
    the lease and the projector's rows are not fsynced."""
    from projections.projector import Projector

    _, recorder = sqlite_file
    world = world_on(LedgerStore(recorder))
    projector = Projector(world.store, recorder.make_backend().views)
    written: list[bool] = []
    insert = recorder.insert_events

    def counting(stored: Any, **kwargs: Any) -> Any:
        written.append(bool(kwargs.get("durable", True)))
        return insert(stored, **kwargs)

    recorder.insert_events = counting  # type: ignore[method-assign]
    before = recorder.durable_count
    steps: dict[str, int] = {}

    def step(name: str) -> None:
        steps[name] = recorder.durable_count - before - sum(steps.values())

    attempt_id = world.approved("provider_idempotency")  # propose, present, approve
    step("propose+present+approve")
    projector.project_attempt(attempt_id)
    step("view")
    world.worker().process(attempt_id)  # lease, marker, call, result
    step("lease+marker+result")
    projector.project_attempt(attempt_id)
    step("view again")
    assert world.attempt(attempt_id).status is AttemptStatus.SUCCEEDED
    assert steps == {
        "propose+present+approve": 3,
        "view": 0,
        "lease+marker+result": 2,
        "view again": 0,
    }
    answered_or_before_a_call = 5
    assert recorder.durable_count - before <= answered_or_before_a_call
    assert written.count(False) == 1  # the lease: a commit that is not fsynced
