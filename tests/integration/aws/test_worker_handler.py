"""The worker Lambda handler fed real DynamoDB Streams records (design.md 5.3, I8, I10)."""

from __future__ import annotations

import dataclasses
import io
from datetime import timedelta
from typing import Any

import pytest

from adapters import housekeeping
from adapters.aws_lambda import projector, worker
from adapters.bootstrap import Ledger
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.streams import work_from_records
from domain.attempt import AttemptStatus
from domain.errors import StoreUnavailable
from domain.proposal import Proposal
from domain.services.policies import apply_policy_set
from domain.timeutil import parse_utc
from tests.support.aws_lambda import (
    FakeLambdaContext,
    StreamTap,
    metric_total,
    use_ledger,
    wire,
    without_image,
)
from tests.support.sam_template import filter_patterns, load_template, passes
from tests.support.worlds.approval import CAPABILITY
from tests.support.worlds.execution import ExecutionWorld

pytestmark = pytest.mark.dynamodb

CONTENT = "Buy milk"  # the proposal content ExecutionWorld approves: never in a log line


@pytest.fixture(scope="module")
def worker_filter() -> list[dict[str, Any]]:
    return filter_patterns(load_template()["Resources"]["WorkerFunction"], "QueuedAttempts")


@pytest.fixture(scope="module")
def projector_filter() -> list[dict[str, Any]]:
    return filter_patterns(load_template()["Resources"]["ProjectorFunction"], "AttemptEvents")


def delivered(stream: StreamTap, patterns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records Lambda would deliver through a filter."""
    return [r for r in stream.records() if passes(patterns, r)]


def test_template_filters_select_the_work_from_real_stream_records(
    world: ExecutionWorld,
    stream: StreamTap,
    worker_filter: list[dict[str, Any]],
    projector_filter: list[dict[str, Any]],
) -> None:
    attempt_id = world.approved("provider_idempotency")
    records = stream.records()
    queued = [r for r in records if passes(worker_filter, r)]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in queued] == [attempt_id]
    assert work_from_records(records) == [attempt_id]  # the shared rule agrees
    projected = [r for r in records if passes(projector_filter, r)]
    proposal_id = world.attempt(attempt_id).proposal_id
    assert {r["dynamodb"]["Keys"]["pk"]["S"] for r in projected} == {attempt_id, proposal_id}
    assert len(records) > len(projected)  # directory, lookup, due and head items


def test_queued_record_executes_once_despite_a_duplicate_and_a_malformed_record(
    world: ExecutionWorld,
    stream: StreamTap,
    worker_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    logs: io.StringIO,
    capsys: pytest.CaptureFixture[str],
) -> None:
    attempt_id = world.approved("provider_idempotency")
    (queued,) = delivered(stream, worker_filter)
    malformed = without_image(queued, "999999999999999999999")

    response = worker.handler({"Records": [queued, queued, malformed]}, context)

    assert response == {"batchItemFailures": [{"itemIdentifier": "999999999999999999999"}]}
    assert world.attempt(attempt_id).status is AttemptStatus.SUCCEEDED
    assert world.calls_for(attempt_id) == 1
    out = capsys.readouterr().out
    assert metric_total(out, "Attempts", outcome="succeeded", service=worker.SERVICE) == 1
    assert metric_total(out, "Attempts", outcome="skipped", service=worker.SERVICE) == 1
    assert metric_total(out, "RecordFailures") == 1
    assert metric_total(out, "OutcomeUnknown") == 0
    # the names the server exports to Prometheus, as EMF
    assert (
        metric_total(
            out, "ledger_worker_outcomes_total", outcome="succeeded", service=worker.SERVICE
        )
        == 1
    )
    assert (
        metric_total(
            out,
            "ledger_executor_call_duration_seconds",
            outcome="ok",
            capability="fake.provider_idempotency",
        )
        > 0
    )
    written = logs.getvalue()
    assert "malformed_record" in written and attempt_id in written
    assert CONTENT not in written and CONTENT not in out


def test_record_for_an_already_terminal_attempt_changes_nothing(
    world: ExecutionWorld,
    stream: StreamTap,
    worker_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    attempt_id = world.approved("provider_idempotency")
    (queued,) = delivered(stream, worker_filter)
    assert worker.handler({"Records": [queued]}, context) == {"batchItemFailures": []}
    events = world.topics(attempt_id)
    capsys.readouterr()

    # A Lambda retry of the same batch, long after the attempt settled.
    world.clock.advance(3600)
    assert worker.handler({"Records": [queued]}, context) == {"batchItemFailures": []}

    assert world.topics(attempt_id) == events
    assert world.calls_for(attempt_id) == 1
    assert metric_total(capsys.readouterr().out, "Attempts", outcome="skipped") == 1


def test_records_that_are_not_work_are_acknowledged_without_leaking_content(
    world: ExecutionWorld,
    stream: StreamTap,
    context: FakeLambdaContext,
    logs: io.StringIO,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Everything the table wrote, as if the filter were missing: the handler's
    # own rule (adapters.streams) still picks out the one queued attempt.
    attempt_id = world.approved("provider_idempotency")
    records = stream.records()

    assert worker.handler({"Records": records}, context) == {"batchItemFailures": []}

    assert world.attempt(attempt_id).status is AttemptStatus.SUCCEEDED
    assert world.calls_for(attempt_id) == 1
    out = capsys.readouterr().out
    assert CONTENT not in logs.getvalue() and CONTENT not in out
    assert '"NewImage"' not in logs.getvalue()


def test_store_failure_is_a_batch_item_failure_with_a_reason_code(
    monkeypatch: pytest.MonkeyPatch,
    dynamodb_client: Any,
    world: ExecutionWorld,
    stream: StreamTap,
    worker_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    logs: io.StringIO,
) -> None:
    world.approved("provider_idempotency")
    (queued,) = delivered(stream, worker_filter)
    gone = DynamoDBLedgerRecorder(table_name="ledger-test-no-such-table", client=dynamodb_client)
    use_ledger(monkeypatch, wire(gone))

    response = worker.handler({"Records": [queued]}, context)

    assert response == {
        "batchItemFailures": [{"itemIdentifier": queued["dynamodb"]["SequenceNumber"]}]
    }
    assert '"reason":"store_unavailable"' in logs.getvalue().replace(" ", "")


def test_recovery_mode_leases_an_attempt_whose_record_was_missed(
    world: ExecutionWorld,
    context: FakeLambdaContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    attempt_id = world.approved("provider_idempotency")  # its stream record is never delivered
    world.clock.advance(30)

    answer = worker.handler({"mode": "recovery"}, context)

    assert answer["examined"] == 1 and answer["outcomes"] == {"succeeded": 1}
    assert world.attempt(attempt_id).status is AttemptStatus.SUCCEEDED
    assert world.calls_for(attempt_id) == 1
    out = capsys.readouterr().out
    assert metric_total(out, "RecoveryLagSeconds", service=worker.SERVICE) == 30
    assert metric_total(out, "Attempts", outcome="succeeded") == 1
    # The next tick finds nothing due.
    assert worker.handler({"mode": "recovery"}, context)["examined"] == 0


def test_recovery_runs_when_the_waiting_count_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch,
    world: ExecutionWorld,
    context: FakeLambdaContext,
    logs: io.StringIO,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A role without a read of the queued list (as the deployed worker had): the
    # count is refused, and the attempt that is due still runs.
    def refused(*args: Any, **kwargs: Any) -> int:
        raise StoreUnavailable()

    monkeypatch.setattr(worker, "count_waiting_for_build", refused)
    attempt_id = world.approved("provider_idempotency")
    world.clock.advance(30)

    answer = worker.handler({"mode": "recovery"}, context)

    assert answer["outcomes"] == {"succeeded": 1}
    assert answer["waiting_for_build"] is None
    assert world.calls_for(attempt_id) == 1
    assert '"reason":"store_unavailable"' in logs.getvalue().replace(" ", "")
    assert metric_total(capsys.readouterr().out, "AttemptsWaitingForBuild") == 0


ON_CALL = f"""
@id("on-call")
@escalate_to("leads")
@escalate_before("10m")
permit (principal, action == Action::"{CAPABILITY}", resource);
"""


def presented_and_watched(
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
) -> str:
    """A proposal under ON_CALL, presented to its actor and projected onto the
    escalation watch (by the projector function, from the stream), with the
    clock 5 minutes before it expires: inside the policy's lead time."""
    view = apply_policy_set(world.store, world.clock, ON_CALL, cache=world.ctx.cache)
    proposal_id = world.propose(policy_digest=view.digest)
    world.present(proposal_id)
    assert projector.handler({"Records": delivered(stream, projector_filter)}, context) == {
        "batchItemFailures": []
    }
    proposal = world.store.get(Proposal, proposal_id)
    assert proposal is not None
    world.clock.moment = parse_utc(proposal.expiry_of(1)) - timedelta(minutes=5)
    return proposal_id


def test_recovery_escalates_an_unanswered_approval_that_is_due(
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    proposal_id = presented_and_watched(world, stream, projector_filter, context)

    answer = worker.handler({"mode": "recovery"}, context)

    assert answer["escalated"] == 1
    proposal = world.store.get(Proposal, proposal_id)
    assert proposal is not None and proposal.versions[1]["escalated"]["group"] == "leads"
    assert metric_total(capsys.readouterr().out, "ApprovalsEscalated") == 1
    # once per version: the next tick (the watch row not yet gone) escalates nothing
    assert worker.handler({"mode": "recovery"}, context)["escalated"] == 0
    topics = [e.topic.rsplit(".", 1)[-1] for e in world.store.read_stream(proposal_id)]
    assert topics.count("Escalated") == 1


def test_a_failed_escalation_pass_never_stops_the_recovery(
    monkeypatch: pytest.MonkeyPatch,
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    logs: io.StringIO,
) -> None:
    attempt_id = world.approved("provider_idempotency")  # due when the tick runs
    proposal_id = presented_and_watched(world, stream, projector_filter, context)

    def refused(*args: Any, **kwargs: Any) -> bool:
        raise StoreUnavailable()

    monkeypatch.setattr(housekeeping, "escalate_if_due", refused)
    answer = worker.handler({"mode": "recovery"}, context)

    assert answer["escalated"] is None
    assert answer["outcomes"] == {"succeeded": 1}
    assert world.calls_for(attempt_id) == 1
    line = next(x for x in logs.getvalue().splitlines() if "escalation pass failed" in x)
    assert '"reason":"store_unavailable"' in line.replace(" ", "")
    proposal = world.store.get(Proposal, proposal_id)
    assert proposal is not None and "escalated" not in proposal.versions[1]


def test_execution_switch_leaves_work_queued_until_it_is_turned_back_on(
    monkeypatch: pytest.MonkeyPatch,
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    worker_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    off = dataclasses.replace(
        ledger, settings=ledger.settings.model_copy(update={"execution_enabled": False})
    )
    use_ledger(monkeypatch, off)
    attempt_id = world.approved("provider_idempotency")
    (queued,) = delivered(stream, worker_filter)

    # Off: the record is acknowledged, not failed (nothing goes to the failure
    # queue), and recovery leases nothing; the due-work entry keeps the work.
    assert worker.handler({"Records": [queued]}, context) == {"batchItemFailures": []}
    assert worker.handler({"mode": "recovery"}, context)["examined"] == 0
    assert world.attempt(attempt_id).status is AttemptStatus.QUEUED
    due = ledger.store.due_work(world.clock.now(), 10).items
    assert [entry.attempt_id for entry in due] == [attempt_id]
    assert world.calls_for(attempt_id) == 0
    assert metric_total(capsys.readouterr().out, "RecordsLeftForRecovery") == 1

    # On again: the next recovery tick runs what waited, exactly once.
    use_ledger(monkeypatch, ledger)
    assert worker.handler({"mode": "recovery"}, context)["outcomes"] == {"succeeded": 1}
    assert world.attempt(attempt_id).status is AttemptStatus.SUCCEEDED
    assert world.calls_for(attempt_id) == 1


@pytest.mark.filterwarnings("ignore:No application metrics")
def test_an_unrecognised_event_fails_the_invocation(
    ledger: Ledger, context: FakeLambdaContext
) -> None:
    with pytest.raises(ValueError, match="unrecognised event"):
        worker.handler({"detail-type": "something else"}, context)
