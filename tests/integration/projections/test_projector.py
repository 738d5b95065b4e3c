"""The projector: idempotent, never regresses, heals gaps, rebuilds byte-identically."""

from __future__ import annotations

import contextlib
import random
from dataclasses import replace

import pytest

from adapters.bootstrap import Ledger, backend_for, build_ledger
from adapters.mapping import make_library_mapper
from adapters.rebuild import canonical, fold_stored_status, rebuild
from adapters.settings import load_settings
from adapters.store import LedgerStore
from domain.attempt import AttemptStatus
from domain.errors import LedgerError
from domain.ports import Commit
from domain.services.execution import CrashPoint, SimulatedCrash
from domain.services.recovery import run_recovery
from domain.services.resolution import resolve
from projections.ports import ViewStore
from projections.projector import Projector
from projections.status import STATUS_VIEW, status_list_key, status_record
from tests.support.attempt_histories import random_history
from tests.support.worlds.execution import LEASE, MODES, CrashAt, ExecutionWorld


def test_projecting_twice_is_idempotent(
    pworld: ExecutionWorld, projector: Projector, views: ViewStore
) -> None:
    attempt_id = pworld.approved("provider_idempotency")
    assert projector.project_attempt(attempt_id) is True
    assert projector.project_attempt(attempt_id) is False
    view = views.get_view(STATUS_VIEW, attempt_id)
    assert view is not None and view.version == 1 and view.data["status"] == "queued"


def test_an_older_version_never_replaces_a_newer_view(
    pworld: ExecutionWorld, store: LedgerStore, projector: Projector, views: ViewStore
) -> None:
    attempt_id = pworld.approved("provider_idempotency")
    queued = pworld.attempt(attempt_id)
    old_record = status_record(queued)
    pworld.worker().process(attempt_id)
    projector.project_attempt(attempt_id)
    assert views.put_view(old_record) is False  # a late, reordered delivery
    view = views.get_view(STATUS_VIEW, attempt_id)
    assert view is not None and view.data["status"] == "succeeded"


def test_a_gap_heals_by_reading_the_stream(
    pworld: ExecutionWorld, projector: Projector, views: ViewStore
) -> None:
    attempt_id = pworld.approved("provider_idempotency")
    projector.project_attempt(attempt_id)
    pworld.worker().process(attempt_id)  # Leased, DispatchStarted, ResultRecorded: never seen
    # the status row and its 7 find rows, once; no row for an empty or other stream
    assert projector.project_streams([attempt_id, attempt_id, "prop_x", "actor:alice"]) == 8
    view = views.get_view(STATUS_VIEW, attempt_id)
    assert view is not None
    assert view.version == len(pworld.topics(attempt_id))
    assert view.data["status"] == "succeeded"


def test_status_lists_page_oldest_first(
    pworld: ExecutionWorld, projector: Projector, views: ViewStore
) -> None:
    ids = []
    for _ in range(5):
        ids.append(pworld.approved("operator_reconciliation_only", simulate="timeout_after_effect"))
        pworld.clock.advance(1)
    for attempt_id in ids:
        pworld.worker().process(attempt_id)
        pworld.clock.advance(1)
        projector.project_attempt(attempt_id)
    seen, cursor = [], None
    while True:
        page, cursor = views.list_views(status_list_key("outcome_unknown"), 2, cursor)
        seen.extend(r.key for r in page)
        if cursor is None:
            break
    assert seen == ids
    assert views.list_views(status_list_key("queued"), 10)[0] == []


def random_workload(world: ExecutionWorld, rng: random.Random, steps: int) -> list[str]:
    """Approvals, workers (some crashing), recovery ticks, clock jumps, resolutions."""
    attempts: list[str] = []
    for _ in range(steps):
        action = rng.choice(["approve", "approve", "work", "crash", "recover", "jump", "resolve"])
        try:
            if action == "approve":
                mode = rng.choice(sorted(MODES))
                simulate = rng.choice(
                    ["success", "timeout_after_effect", "no_write_error", "unsafe_receipt"]
                )
                attempts.append(world.approved(mode, simulate))
            elif action == "work" and attempts:
                world.worker().process(rng.choice(attempts))
            elif action == "crash" and attempts:
                crash = CrashAt(rng.choice(list(CrashPoint)))
                with contextlib.suppress(SimulatedCrash):
                    world.worker(crash).process(rng.choice(attempts))
            elif action == "recover":
                run_recovery(world.worker())
            elif action == "jump":
                world.clock.advance(LEASE + 1)
            elif action == "resolve" and attempts:
                attempt = world.attempt(rng.choice(attempts))
                if attempt.status == "outcome_unknown":
                    resolve(
                        world.ctx,
                        attempt_id=attempt.id,
                        expected_revision=attempt.revision,
                        outcome=rng.choice(["effect_applied", "no_effect"]),
                        reason="checked by hand",
                        resolved_by="admin",
                    )
        except LedgerError:
            pass
    return attempts


@pytest.mark.slow
def test_rebuilt_views_are_byte_identical_to_live_ones(
    pworld: ExecutionWorld, store: LedgerStore, views: ViewStore, projector: Projector
) -> None:
    from adapters.bootstrap import backend_for
    from adapters.rebuild import rebuild
    from adapters.settings import load_settings

    rng = random.Random(20261129)
    attempts = random_workload(pworld, rng, 60)
    assert len(attempts) >= 5
    # the live projector follows every stream it is told about
    projector.project_streams(attempts)
    ledger = Ledger(
        settings=load_settings(store="memory"),
        store=store,
        clock=pworld.clock,
        views=views,
        backend=backend_for(store.recorder),
    )
    live = {a: canonical(views.get_view(STATUS_VIEW, a)) for a in attempts}

    for name in ("status", "due_work"):
        report = rebuild(ledger, name, write=False)
        assert report.total == len(set(attempts))
        assert report.changed == [], (name, report.changed)
    # byte for byte, the rebuilt status rows equal the live ones, and the
    # rebuild's fold from the stored data took every stream (none fell back)
    for attempt_id in attempts:
        rebuilt = canonical(status_record(pworld.attempt(attempt_id)))
        assert rebuilt == live[attempt_id]
        from_stored = fold_stored_status(attempt_id, store.read_stream(attempt_id))
        assert from_stored is not None and canonical(from_stored) == live[attempt_id]

    # a corrupted view is found and repaired
    victim = attempts[0]
    good = views.get_view(STATUS_VIEW, victim)
    assert good is not None
    views.put_view(
        type(good)(
            good.name, good.key, good.version, {"status": "forged"}, good.list_pk, good.list_sk
        ),
        force=True,
    )
    report = rebuild(ledger, "status")
    assert report.changed == [victim]
    assert canonical(views.get_view(STATUS_VIEW, victim)) == live[victim]
    assert rebuild(ledger, "status", write=False).changed == []


def test_the_live_projector_and_the_rebuild_make_byte_identical_rows_of_random_histories(
    store: LedgerStore,
) -> None:
    """Every event type and status, checked after every step; a few streams in
    the library's older stored form (which the rebuild cannot take from the
    bytes straight, and reads as the live projector does); then the whole
    rebuild, comparing and writing."""
    ledger = build_ledger(
        load_settings(store="memory", env="test"), backend=backend_for(store.recorder)
    )
    views = ledger.views
    assert views is not None
    rng = random.Random(7)
    library = make_library_mapper()
    ids: list[str] = []
    seen: set[str] = set()
    for n in range(60):
        older_form = n % 8 == 7
        for attempt in random_history(rng, n, max_steps=10):
            if older_form:
                events = attempt.collect_events()
                store.recorder.insert_events([library.to_stored_event(e) for e in events])
            else:
                store.commit(Commit(aggregates=[attempt]))
            ledger.projector.project_attempt(attempt.id)
            live = canonical(views.get_view(STATUS_VIEW, attempt.id))
            assert live == canonical(status_record(attempt))
            from_bytes = fold_stored_status(attempt.id, store.read_stream(attempt.id))
            assert (from_bytes is None) == older_form
            assert older_form or canonical(from_bytes) == live
            seen.add(attempt.status.value)
        ids.append(attempt.id)
    assert seen == {s.value for s in AttemptStatus}

    report = rebuild(ledger, "status", write=False)  # SQLite compares the rows as stored
    assert report.total == len(ids) and report.changed == []
    # every row spoiled, the rebuild writes the live rows again, byte for byte
    live_rows = {a: canonical(views.get_view(STATUS_VIEW, a)) for a in ids}
    for attempt_id in ids:
        good = views.get_view(STATUS_VIEW, attempt_id)
        assert good is not None
        views.put_view(replace(good, data={"status": "forged"}), force=True)
    assert sorted(rebuild(ledger, "status").changed) == sorted(ids)
    assert {a: canonical(views.get_view(STATUS_VIEW, a)) for a in ids} == live_rows
    assert rebuild(ledger, "status", write=False).changed == []
