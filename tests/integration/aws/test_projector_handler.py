"""The projector Lambda handler fed real attempt stream records (design.md 6)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.aws_lambda import projector, worker
from adapters.bootstrap import Ledger
from projections.status import STATUS_VIEW
from tests.support.aws_lambda import FakeLambdaContext, StreamTap, metric_total
from tests.support.sam_template import filter_patterns, load_template, passes
from tests.support.worlds.execution import ExecutionWorld

pytestmark = pytest.mark.dynamodb


@pytest.fixture(scope="module")
def projector_filter() -> list[dict[str, Any]]:
    return filter_patterns(load_template()["Resources"]["ProjectorFunction"], "AttemptEvents")


def status_of(ledger: Ledger, attempt_id: str) -> tuple[str, int] | None:
    assert ledger.views is not None
    view = ledger.views.get_view(STATUS_VIEW, attempt_id)
    return None if view is None else (view.data["status"], view.version)


def test_projector_writes_the_status_view_from_real_records_and_ignores_replays(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    attempt_id = world.approved("provider_idempotency")
    assert worker.handler({"mode": "recovery"}, context)["outcomes"] == {"succeeded": 1}
    records = [
        r
        for r in stream.records()
        if passes(projector_filter, r) and r["dynamodb"]["Keys"]["pk"]["S"].startswith("att_")
    ]
    assert len(records) >= 4  # queued, leased, dispatch started, result
    capsys.readouterr()

    assert projector.handler({"Records": records}, context) == {"batchItemFailures": []}

    version = world.attempt(attempt_id).version
    assert status_of(ledger, attempt_id) == ("succeeded", version)
    # one read of the stream: its status row and its 7 find rows, written once
    assert metric_total(capsys.readouterr().out, "ViewsMoved") == 8

    # A redelivered batch, or only its oldest record: the view never regresses.
    assert projector.handler({"Records": records[:1]}, context) == {"batchItemFailures": []}
    assert projector.handler({"Records": records}, context) == {"batchItemFailures": []}
    assert status_of(ledger, attempt_id) == ("succeeded", version)
    assert metric_total(capsys.readouterr().out, "ViewsMoved") == 0


def test_projector_reports_a_record_without_keys_as_a_batch_item_failure(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
) -> None:
    attempt_id = world.approved("provider_idempotency")
    (queued,) = [
        r
        for r in stream.records()
        if passes(projector_filter, r) and r["dynamodb"]["Keys"]["pk"]["S"] == attempt_id
    ]
    broken = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "42"}}

    response = projector.handler({"Records": [queued, broken]}, context)

    assert response == {"batchItemFailures": [{"itemIdentifier": "42"}]}
    assert status_of(ledger, attempt_id) == ("queued", 1)


@pytest.mark.parametrize(
    "unnamed",
    [{"eventName": "INSERT"}, {"eventName": "INSERT", "dynamodb": {}}],
    ids=["no-dynamodb-part", "no-sequence-number"],
)
def test_a_failed_record_without_a_sequence_number_fails_the_whole_batch(
    ledger: Ledger, context: FakeLambdaContext, unnamed: dict[str, Any]
) -> None:
    """Lambda retries the whole batch on an empty identifier: the only safe
    report for a record it cannot name."""
    named = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "42"}}

    response = projector.handler({"Records": [unnamed, named]}, context)

    assert response == {"batchItemFailures": [{"itemIdentifier": "42"}, {"itemIdentifier": ""}]}


def test_projector_skips_records_of_other_streams(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    context: FakeLambdaContext,
) -> None:
    world.approved("provider_idempotency")
    others = [
        r
        for r in stream.records()
        if not r["dynamodb"]["Keys"]["pk"]["S"].startswith(("att_", "prop_"))
    ]
    assert others

    assert projector.handler({"Records": others}, context) == {"batchItemFailures": []}


def test_projector_folds_proposal_records_into_the_inbox(
    ledger: Ledger,
    world: ExecutionWorld,
    stream: StreamTap,
    projector_filter: list[dict[str, Any]],
    context: FakeLambdaContext,
) -> None:
    """A decline writes no attempt: only its proposal records tell the projector."""
    from domain.services.decisions import decline
    from projections.inbox import INBOX_VIEW

    proposal_id = world.propose()
    decline(world.ctx, token=world.present(proposal_id).token, provenance=world.who)
    records = [r for r in stream.records() if passes(projector_filter, r)]
    assert {r["dynamodb"]["Keys"]["pk"]["S"] for r in records} == {proposal_id}

    assert projector.handler({"Records": records}, context) == {"batchItemFailures": []}
    assert ledger.views is not None
    row = ledger.views.get_view(INBOX_VIEW, proposal_id)
    assert row is not None and row.data["status"] == "declined"
