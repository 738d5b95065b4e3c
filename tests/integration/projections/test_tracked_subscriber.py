"""The status projector as a tracked subscriber of the log, on memory, SQLite and
DynamoDB: it resumes from the position written with its views after a restart,
a crash right after its write, or a second projector on the same store; and
whatever was written while it was not running reaches the views and lists."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.bootstrap import Ledger, backend_for, build_ledger
from adapters.rebuild import rebuild
from adapters.runtime import Runtime, SubscriberRun, subscriber_runs
from adapters.settings import load_settings
from adapters.store import LedgerStore
from domain.services.execution import CrashPoint
from domain.services.execution import SimulatedCrash as ExecutionCrash
from projections.status import STATUS_VIEW, status_list_key
from tests.support.clocks import FixedClock
from tests.support.subscribers import (
    CrashAfterApply,
    FailingWrites,
    SimulatedCrash,
    drain,
    restarted,
    streams_client,
)
from tests.support.worlds.execution import CrashAt, ExecutionWorld


def assert_views_equal_rebuild(ledger: Ledger, attempts: Sequence[str]) -> None:
    report = rebuild(ledger, "status", write=False)
    assert report.changed == [], report.changed
    assert report.total >= len(set(attempts))


@pytest.fixture
def ledger(store: LedgerStore, pworld: ExecutionWorld, request: pytest.FixtureRequest) -> Ledger:
    backend = backend_for(store.recorder)
    if backend.kind == "dynamodb":
        from adapters.dynamodb.backend import DynamoDBBackend

        endpoint = request.getfixturevalue("dynamodb_endpoint")
        backend = DynamoDBBackend(
            store.recorder,  # type: ignore[arg-type]
            streams_client=streams_client(endpoint),
        )
    return build_ledger(
        load_settings(store="memory", env="test"), backend=backend, clock=pworld.clock
    )


def test_events_written_while_no_projector_ran_reach_the_views_and_lists(
    ledger: Ledger, pworld: ExecutionWorld
) -> None:
    """The issue's scenario: approved (queued), projector stopped, the attempt
    executed by someone else, projector started: succeeded in view and list."""
    attempts = [pworld.approved("provider_idempotency") for _ in range(3)]
    drain(ledger)
    for attempt_id in attempts:
        view = ledger.views.get_view(STATUS_VIEW, attempt_id)  # type: ignore[union-attr]
        assert view is not None and view.data["status"] == "queued"

    # While down: `ledger recover --once` (another process) executes them.
    for attempt_id in attempts:
        assert pworld.worker().process(attempt_id).value == "succeeded"

    again = restarted(ledger)
    assert drain(again) > 0
    assert_views_equal_rebuild(again, attempts)
    assert again.views is not None
    listed, _ = again.views.list_views(status_list_key("succeeded"), 50)
    assert {r.key for r in listed} == set(attempts)
    lag = again.projection_lag().get("status")
    if lag is not None:
        assert (lag.events_behind, lag.exact) == (0, True)


def test_a_crash_right_after_the_view_write_loses_nothing_and_repeats_nothing(
    ledger: Ledger, pworld: ExecutionWorld
) -> None:
    """Rows and position are one write: a process that dies after it (before
    moving its in-memory position on) resumes after what it wrote."""
    # The directory's records (on DynamoDB a striped record is many stream
    # records) are projected first, so the one run below reaches the attempts.
    pworld.approved("provider_idempotency")
    drain(ledger)
    attempts = [pworld.approved("provider_idempotency") for _ in range(2)]
    (run,) = subscriber_runs(ledger)
    crashing = SubscriberRun(run.subscriber, CrashAfterApply(run.reader), run.cover_gap)
    runtime = Runtime(ledger, None, recovery_interval=3600, recovery=False, poll_seconds=0)
    with pytest.raises(SimulatedCrash):
        runtime.run_subscriber_once(crashing)
    for attempt_id in attempts:  # the write itself happened
        assert ledger.views.get_view(STATUS_VIEW, attempt_id) is not None  # type: ignore[union-attr]

    for attempt_id in attempts:
        pworld.worker().process(attempt_id)
    again = restarted(ledger)
    drain(again)
    assert_views_equal_rebuild(again, attempts)


def test_a_failed_write_records_no_position(ledger: Ledger, pworld: ExecutionWorld) -> None:
    """A write that fails (an outage, a crash inside it) moves neither rows nor
    position: the batch is read again, nothing is skipped."""
    attempt_id = pworld.approved("provider_idempotency")
    assert ledger.views is not None
    ledger.views = FailingWrites(ledger.views)  # type: ignore[assignment]
    runtime = Runtime(ledger, None, recovery_interval=3600, recovery=False, poll_seconds=0)
    (run,) = subscriber_runs(ledger)
    with pytest.raises(SimulatedCrash):
        runtime.run_subscriber_once(run)
    ledger.views = ledger.views.inner  # type: ignore[attr-defined]
    assert ledger.views.get_view(STATUS_VIEW, attempt_id) is None
    again = restarted(ledger)
    drain(again)
    assert_views_equal_rebuild(again, [attempt_id])


def test_two_projectors_on_one_store_both_end_equal_to_a_rebuild(
    ledger: Ledger, pworld: ExecutionWorld
) -> None:
    """Two servers on one store: the one behind finds the other's position
    further on (IntegrityError), resumes from it, and misses nothing."""
    assert ledger.backend is not None
    if ledger.backend.kind == "memory":
        pytest.skip("one process only: a memory store has no second server")
    attempts = [pworld.approved("provider_idempotency") for _ in range(3)]
    other = restarted(ledger)
    drain(other)  # the other server is ahead
    for attempt_id in attempts:
        pworld.worker().process(attempt_id)
    drain(ledger)  # this one was behind: it catches up without an error
    drain(other)
    assert_views_equal_rebuild(ledger, attempts)
    assert_views_equal_rebuild(other, attempts)


def test_outcome_unknown_reaches_the_attention_list_after_a_restart(
    ledger: Ledger, pworld: ExecutionWorld
) -> None:
    """The SIGKILL finding: an outcome_unknown attempt stayed `executing` in its
    view, so no human was told."""
    attempt_id = pworld.approved("operator_reconciliation_only")
    drain(ledger)
    with pytest.raises(ExecutionCrash):  # killed after the dispatch marker
        pworld.worker(CrashAt(CrashPoint.AFTER_DISPATCH_MARKER)).process(attempt_id)
    drain(ledger)  # the view says `executing`
    pworld.recover_after_lease()  # meanwhile, elsewhere: outcome_unknown
    assert pworld.attempt(attempt_id).status == "outcome_unknown"
    again = restarted(ledger)
    drain(again)
    assert again.views is not None
    listed, _ = again.views.list_views(status_list_key("outcome_unknown"), 50)
    assert attempt_id in {r.key for r in listed}
    assert_views_equal_rebuild(again, [attempt_id])


def test_lag_counts_the_events_not_yet_applied_and_the_age_of_the_oldest(
    ledger: Ledger, pworld: ExecutionWorld
) -> None:
    assert ledger.backend is not None
    attempt_id = pworld.approved("provider_idempotency")
    later = build_ledger(
        ledger.settings,
        backend=ledger.backend,
        clock=FixedClock(datetime.now(UTC) + timedelta(hours=1)),
    )
    if ledger.backend.kind != "dynamodb":  # a stream reader knows only what it has read
        lag = later.projection_lag()["status"]
        written = len(pworld.store.read_stream(attempt_id))
        assert lag.events_behind >= written and lag.exact
        assert 3500 < lag.oldest_age_seconds < 3700
    drain(later)
    lag = later.projection_lag()["status"]
    assert (lag.events_behind, lag.oldest_age_seconds, lag.exact) == (0, 0.0, True)


def test_a_position_past_the_stream_retention_is_reported_and_covered_by_a_rebuild(
    ledger: Ledger, pworld: ExecutionWorld
) -> None:
    """DynamoDB Streams keep records for 24 hours: a position the stream no
    longer holds means records were lost unread. The runtime says so and
    rebuilds the views instead of trusting the stream."""
    assert ledger.backend is not None
    if ledger.backend.kind != "dynamodb":
        pytest.skip("the notification log of the embedded stores is never trimmed")
    from adapters.dynamodb.streams import list_shards
    from adapters.dynamodb.views import ShardTracking, shard_tracking_name

    attempt_id = pworld.approved("provider_idempotency")
    backend: Any = ledger.backend
    (shard,) = list_shards(backend.streams_client, backend.stream_arn())
    gone = "9" * 30  # a sequence number the stream does not hold (trimmed)
    backend.views.put_views(
        [], [ShardTracking(shard_tracking_name("status", shard), int(gone), sequence_number=gone)]
    )
    again = restarted(ledger)
    (run,) = subscriber_runs(again)
    runtime = Runtime(again, None, recovery_interval=3600, recovery=False, poll_seconds=0)
    runtime.run_subscriber_once(run)
    assert again.metrics.value("ledger_projection_rebuilds_total", subscriber="status") == 1
    assert again.views is not None
    view = again.views.get_view(STATUS_VIEW, attempt_id)
    assert view is not None and view.data["status"] == "queued"
    assert_views_equal_rebuild(again, [attempt_id])
