"""The projector and webhook Lambdas' stream-batch handling as it was before
batching, kept runnable for ``bench_protocol.py`` only (never imported by the
ledger): each stream of a batch is projected on its own (the status row by a
conditional ``PutItem``, its find rows by a ``TransactWriteItems``; a
proposal's watch and inbox rows by a ``PutItem`` each), and each webhook
subscription reads every stream again and writes each delivery record by a
``PutItem`` of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from adapters.aws_lambda.common import RecordFailed, process_stream_batch, reason_code
from adapters.aws_lambda.records import stream_id_from_record
from domain.proposal import Proposal
from domain.spec import ATTEMPT_ID_PREFIX
from projections.escalation_watch import watch_record
from projections.find import read_rows
from projections.inbox import PROPOSAL_PREFIX, inbox_record
from projections.ports import TrackedViewStore
from projections.projector import Projector
from projections.webhooks import WebhookNotifier


def _each_stream_once(event: Mapping[str, Any], apply: Callable[[str], int]) -> int:
    """``apply`` once per stream a batch names (each record in turn)."""
    done: set[str] = set()
    total = 0

    def handle(record: DynamoDBRecord) -> str:
        nonlocal total
        try:
            stream_id = stream_id_from_record(record.raw_event)
            if stream_id is None or stream_id in done:
                return "skipped"
            total += apply(stream_id)
        except Exception as exc:
            raise RecordFailed(reason_code(exc)) from exc
        done.add(stream_id)
        return "applied"

    process_stream_batch(event, None, handle)
    return total


def _project_attempt(projector: Projector, attempt_id: str) -> int:
    rows = read_rows(projector.store, attempt_id)
    if not rows:
        return 0
    moved = projector.views.put_view(rows[0])
    projector.views.put_views(rows[1:], ())
    return int(moved)


def _project_proposal(projector: Projector, proposal_id: str) -> int:
    proposal = projector.store.get(Proposal, proposal_id)
    if proposal is None:
        return 0
    projector.views.put_view(watch_record(proposal))
    return int(projector.views.put_view(inbox_record(proposal)))


def project_batch(projector: Projector, event: Mapping[str, Any]) -> int:
    """The projector Lambda's batch before: one stream after another."""

    def project(stream_id: str) -> int:
        if stream_id.startswith(ATTEMPT_ID_PREFIX):
            return _project_attempt(projector, stream_id)
        if stream_id.startswith(PROPOSAL_PREFIX):
            return _project_proposal(projector, stream_id)
        return 0

    return _each_stream_once(event, project)


def record_batch(
    notifiers: Sequence[WebhookNotifier], views: TrackedViewStore, event: Mapping[str, Any]
) -> int:
    """The webhook Lambda's fold before: every subscription reads each stream."""

    def record(stream_id: str) -> int:
        return sum(
            views.put_view(row) for notifier in notifiers for row in notifier.records([stream_id])
        )

    return _each_stream_once(event, record)
