"""The worker Lambda: DynamoDB stream batches of queued attempts, and recovery.

One function, two triggers (design.md 5.3, 5.4):

- a DynamoDB Streams batch (filtered by the event source mapping to INSERTs
  of ``Queued`` / ``Requeued`` attempt events). Each record is only a hint:
  the worker re-reads the attempt stream with a consistent read and decides.
  A duplicate record, a record for a settled attempt or a lost race is
  answered as success (nothing to retry); a malformed record or a store
  failure is reported as a batch item failure (partial batch response), so
  Lambda retries from it and, past the retry bound, sends only the batch's
  stream coordinates to the failure queue;
- ``{"mode": "recovery"}`` from the EventBridge schedule: one recovery tick
  over the due-work index.

Both lease only attempts whose exact build this function hosts (I11): a
record or due entry for another build is acknowledged and left due
(``not_hosted``) for a function that has it, and does not count against the
tick's budget. Each tick reports the attempts waiting longer than
``LEDGER_WAITING_FOR_BUILD_SECONDS`` for such a worker
(``AttemptsWaitingForBuild``), and escalates the unanswered approvals whose
policy's lead time has come (``adapters.housekeeping.escalation_pass``; the
deployment has no housekeeping thread), whether or not execution is enabled.

``LEDGER_EXECUTION_ENABLED=false`` turns leasing off without losing work:
stream records are acknowledged (the due-work entry written with every
``Queued``/``Requeued`` is the durable obligation, not the record) and
recovery only measures its lag. Setting it back to true lets the next
recovery tick lease everything that waited.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any, cast

from aws_lambda_powertools import Metrics, single_metric
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from adapters.aws_lambda.common import (
    NAMESPACE,
    RecordFailed,
    emf_forwarder,
    get_ledger,
    make_logger,
    process_stream_batch,
    reason_code,
    record_keys,
)
from adapters.bootstrap import Ledger
from adapters.housekeeping import escalation_pass
from adapters.streams import MalformedRecord, work_from_record
from domain.errors import ConcurrencyConflict, StoreUnavailable
from domain.ports import Commit, EventStore
from domain.services.execution import Outcome, Worker
from domain.services.recovery import run_recovery
from projections.attention import count_waiting_for_build

__all__ = ["handler"]

SERVICE = "ledger-worker"
RECOVERY_MODE = "recovery"
RECOVERY_MAX_ITEMS = 200  # per tick, so one invocation stays well inside its timeout
# Attempts whose build this function does not host are left for one that does
# (I11); they do not count against RECOVERY_MAX_ITEMS, but each costs a read.
RECOVERY_MAX_NOT_HOSTED = 2000
WAITING_COUNT_CAP = 1000  # the AttemptsWaitingForBuild metric counts at most this many

logger = make_logger(SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


class ConflictCountingStore:
    """The ledger's store, counting the conditional appends the worker lost.

    A lost append on the attempt stream is a lease conflict: another worker
    (a duplicate record, a recovery tick, a Lambda retry) got there first.
    """

    def __init__(self, inner: EventStore) -> None:
        self.inner = inner
        self.conflicts = 0

    def commit(self, commit: Commit) -> None:
        try:
            self.inner.commit(commit)
        except ConcurrencyConflict:
            self.conflicts += 1
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _worker(ledger: Ledger) -> tuple[Worker, ConflictCountingStore]:
    # The ledger's own metrics (executor latency, outcomes) go out as EMF under
    # the names the server exports to Prometheus.
    ledger.metrics.forward = emf_forwarder(SERVICE)
    store = ConflictCountingStore(ledger.store)
    context = dataclasses.replace(ledger.context, store=cast(EventStore, store))
    return Worker(context, ledger.worker_policy()), store


def _emit_outcomes(
    ledger: Ledger,
    outcomes: Counter[str],
    conflicts: int,
    *,
    counter: str = "ledger_worker_outcomes_total",
) -> None:
    """Attempts by outcome (a dimension with a fixed set of values), lease
    conflicts and outcome_unknown. Never an id in a metric label (I10)."""
    for outcome, count in sorted(outcomes.items()):
        ledger.metrics.inc(counter, count, outcome=outcome)
        with single_metric(
            name="Attempts",
            unit=MetricUnit.Count,
            value=count,
            namespace=NAMESPACE,
            default_dimensions={"service": SERVICE},
        ) as metric:
            metric.add_dimension(name="outcome", value=outcome)
    metrics.add_metric(name="LeaseConflicts", unit=MetricUnit.Count, value=conflicts)
    metrics.add_metric(
        name="OutcomeUnknown",
        unit=MetricUnit.Count,
        value=outcomes.get(Outcome.OUTCOME_UNKNOWN.value, 0),
    )


def _process_stream(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    ledger = get_ledger()
    enabled = ledger.settings.execution_enabled
    worker, store = _worker(ledger)
    outcomes: Counter[str] = Counter()
    tally: Counter[str] = Counter()

    def handle(record: DynamoDBRecord) -> str:
        raw = record.raw_event
        keys = record_keys(raw)
        try:
            attempt_id = work_from_record(raw)
            if attempt_id is None:
                tally["not_work"] += 1
                return "not_work"
            if not enabled:
                # Acknowledged, not failed: the attempt's due-work entry keeps it.
                tally["execution_disabled"] += 1
                logger.info(
                    "execution disabled; attempt left queued",
                    extra={"attempt_id": attempt_id, **keys},
                )
                return "execution_disabled"
            outcome = worker.process(attempt_id, trigger="stream")
        except MalformedRecord as exc:
            code = "malformed_record"
            logger.warning("stream record failed", extra={"reason": code, **keys})
            raise RecordFailed(code) from exc
        except Exception as exc:  # a store failure: retried by Lambda from this record
            code = reason_code(exc)
            logger.warning("stream record failed", extra={"reason": code, **keys})
            raise RecordFailed(code) from exc
        outcomes[outcome.value] += 1
        logger.info(
            "attempt processed", extra={"attempt_id": attempt_id, "outcome": outcome.value, **keys}
        )
        return outcome.value

    response = process_stream_batch(event, context, handle)
    failed = len(response.get("batchItemFailures", []))
    _emit_outcomes(ledger, outcomes, store.conflicts)
    metrics.add_metric(name="RecordFailures", unit=MetricUnit.Count, value=failed)
    metrics.add_metric(
        name="RecordsLeftForRecovery", unit=MetricUnit.Count, value=tally["execution_disabled"]
    )
    logger.info(
        "stream batch done",
        extra={
            "record_count": len(event.get("Records", [])),
            "failed": failed,
            "outcomes": dict(outcomes),
            "skipped": dict(tally),
            "execution_enabled": enabled,
        },
    )
    return response


def recovery_lag_seconds(ledger: Ledger) -> float:
    """How late the oldest due entry is (0 when nothing is due): one index query."""
    now = ledger.clock.now()
    page = ledger.store.due_work(now, 1)
    if not page.items or page.items[0].next_action_at is None:
        return 0.0
    return max(0.0, (now - page.items[0].next_action_at).total_seconds())


def waiting_for_build(ledger: Ledger) -> int | None:
    """Queued attempts no worker with their build took for the threshold (bounded),
    or None when the queued list could not be read: a metric never stops the
    recovery it measures (the failure is logged with its reason)."""
    assert ledger.views is not None
    try:
        return count_waiting_for_build(
            ledger.views,
            ledger.clock.now(),
            ledger.settings.waiting_for_build_seconds,
            cap=WAITING_COUNT_CAP,
        )
    except StoreUnavailable:
        logger.warning(
            "waiting_for_build not counted: the queued list could not be read",
            extra={"reason": "store_unavailable"},
        )
        return None


def escalations(ledger: Ledger) -> int | None:
    """The escalation pass; None when it failed: an escalation left undone is
    tried again at the next tick and never stops the recovery (the failure is
    logged with its reason)."""
    try:
        return escalation_pass(ledger)
    except Exception as exc:
        logger.warning(
            "escalation pass failed; tried again at the next tick",
            extra={"reason": reason_code(exc)},
        )
        return None


def _recover() -> dict[str, Any]:
    ledger = get_ledger()
    lag = recovery_lag_seconds(ledger)
    waiting = waiting_for_build(ledger)
    escalated = escalations(ledger)
    metrics.add_metric(name="RecoveryLagSeconds", unit=MetricUnit.Seconds, value=lag)
    if waiting is not None:
        metrics.add_metric(name="AttemptsWaitingForBuild", unit=MetricUnit.Count, value=waiting)
    if escalated is not None:
        metrics.add_metric(name="ApprovalsEscalated", unit=MetricUnit.Count, value=escalated)
    if not ledger.settings.execution_enabled:
        logger.info("execution disabled; recovery leased nothing", extra={"lag_seconds": lag})
        return {
            "mode": RECOVERY_MODE,
            "execution_enabled": False,
            "examined": 0,
            "outcomes": {},
            "lag_seconds": lag,
            "waiting_for_build": waiting,
            "escalated": escalated,
        }
    worker, store = _worker(ledger)
    report = run_recovery(
        worker, max_items=RECOVERY_MAX_ITEMS, max_not_hosted=RECOVERY_MAX_NOT_HOSTED
    )
    _emit_outcomes(
        ledger, report.outcomes, store.conflicts, counter="ledger_recovery_examined_total"
    )
    logger.info(
        "recovery tick done",
        extra={
            "examined": report.examined,
            "outcomes": dict(report.outcomes),
            "lag_seconds": lag,
        },
    )
    return {
        "mode": RECOVERY_MODE,
        "execution_enabled": True,
        "examined": report.examined,
        "outcomes": dict(report.outcomes),
        "lag_seconds": lag,
        "waiting_for_build": waiting,
        "escalated": escalated,
    }


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Entry point: a stream batch, or ``{"mode": "recovery"}`` from the schedule."""
    if isinstance(event, Mapping) and event.get("mode") == RECOVERY_MODE:
        return _recover()
    if isinstance(event, Mapping) and isinstance(event.get("Records"), list):
        return _process_stream(event, context)
    # Neither trigger: a misconfigured caller. Fail loudly, say nothing of the payload.
    raise ValueError('unrecognised event: expected stream records or {"mode": "recovery"}')
