"""Running the worker and the recovery loop in-process.

Embedded stores wake the worker from their notification log; DynamoDB feeds it
from the table's stream (through the same record handling the Lambda handler
uses). Either way recovery runs on a fixed interval and catches anything a
feed missed, so a lost wake-up only delays work, never loses it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from eventsourcing.persistence import ApplicationRecorder

from adapters.bootstrap import Ledger
from adapters.streams import WORK_TOPICS, work_from_records
from domain.errors import LedgerError
from domain.services.execution import Worker, WorkerPolicy
from domain.services.recovery import RecoveryReport, run_recovery
from domain.spec import ATTEMPT_ID_PREFIX
from projections.inbox import PROPOSAL_PREFIX

logger = logging.getLogger("ledger.runtime")


def worker_policy(ledger: Ledger) -> WorkerPolicy:
    """The worker policy the settings describe."""
    s = ledger.settings
    return WorkerPolicy(
        lease_seconds=s.lease_seconds,
        backoff_base_seconds=s.backoff_base_seconds,
        backoff_max_seconds=s.backoff_max_seconds,
        max_predispatch_leases=s.max_predispatch_leases,
        max_dispatches=s.max_dispatches,
    )


def make_worker(ledger: Ledger) -> Worker:
    return Worker(ledger.context, worker_policy(ledger))


class WorkFeed(Protocol):
    """A source of attempt ids that may need the worker."""

    def poll(self, wait_seconds: float) -> list[str]: ...


class NotificationLogFeed:
    """Reads new events from an embedded store's notification log.

    By default only Queued/Requeued events (work for the worker); with
    ``topics=()`` every event (what the projector follows).
    """

    def __init__(
        self,
        recorder: ApplicationRecorder,
        *,
        from_start: bool = False,
        topics: Sequence[str] = tuple(sorted(WORK_TOPICS)),
    ) -> None:
        self.recorder = recorder
        self.topics = list(topics)
        self.position = 0 if from_start else (recorder.max_notification_id() or 0)

    def poll(self, wait_seconds: float) -> list[str]:
        notifications = self.recorder.select_notifications(
            start=self.position, limit=100, topics=self.topics, inclusive_of_start=False
        )
        if not notifications:
            time.sleep(wait_seconds)
            return []
        self.position = notifications[-1].id
        return list(dict.fromkeys(str(n.originator_id) for n in notifications))


class DynamoDBStreamFeed:
    """Reads the table's stream with the DynamoDB Streams API (local or AWS).

    ``select`` turns a batch of records into stream ids: work for the worker by
    default, or every attempt stream that changed (for the projector).
    """

    def __init__(
        self,
        streams_client: Any,
        stream_arn: str,
        select: Callable[[list[dict[str, Any]]], list[str]] = work_from_records,
    ) -> None:
        self.client = streams_client
        self.stream_arn = stream_arn
        self.select = select
        self.iterators: dict[str, str | None] = {}
        self.last_sequence: dict[str, str] = {}
        self._discover(initial=True)

    def _renew(self, shard_id: str) -> None:
        """A fresh iterator just after the last record seen (records are hints, so
        reading one again is harmless; skipping one is not)."""
        request: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": shard_id}
        if shard_id in self.last_sequence:
            request.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                           SequenceNumber=self.last_sequence[shard_id])
        else:
            request["ShardIteratorType"] = "TRIM_HORIZON"
        try:
            self.iterators[shard_id] = self.client.get_shard_iterator(**request)["ShardIterator"]
        except Exception as exc:  # tried again on the next poll
            logger.warning("stream shard iterator renewal failed: %s", type(exc).__name__)

    def _discover(self, *, initial: bool = False) -> None:
        description = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        for shard in description.get("Shards", []):
            shard_id = shard["ShardId"]
            if shard_id in self.iterators:
                continue
            kind = "LATEST" if initial else "TRIM_HORIZON"
            self.iterators[shard_id] = self.client.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard_id, ShardIteratorType=kind
            )["ShardIterator"]

    def poll(self, wait_seconds: float) -> list[str]:
        records: list[dict[str, Any]] = []
        for shard_id, iterator in list(self.iterators.items()):
            if iterator is None:
                continue
            try:
                answer = self.client.get_records(ShardIterator=iterator, Limit=100)
            except Exception as exc:
                # The other shards' iterators have moved on already: keep their
                # records, and read this shard again next time from where it was.
                logger.warning("stream shard read failed: %s", type(exc).__name__)
                if _error_code(exc) == "ExpiredIteratorException":
                    self._renew(shard_id)
                continue
            self.iterators[shard_id] = answer.get("NextShardIterator")
            found = answer.get("Records", [])
            if found:
                self.last_sequence[shard_id] = found[-1]["dynamodb"]["SequenceNumber"]
            records.extend(found)
        if not records:
            self._discover()
            time.sleep(wait_seconds)
        return self.select(records)


@dataclass
class Runtime:
    """The worker loop and the recovery loop on background threads."""

    ledger: Ledger
    feed: WorkFeed | None
    recovery_interval: float
    projection_feed: WorkFeed | None = None
    recovery: bool = True
    poll_seconds: float = 0.2
    stop_event: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    on_recovery: Callable[[RecoveryReport], None] | None = None

    def start(self) -> None:
        if self.feed is not None:
            self._spawn("ledger-worker", self._worker_loop)
        if self.projection_feed is not None:
            self._spawn("ledger-projector", self._projector_loop)
        if self.recovery:
            self._spawn("ledger-recovery", self._recovery_loop)

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _worker_loop(self) -> None:
        assert self.feed is not None
        worker = make_worker(self.ledger)
        while not self.stop_event.is_set():
            try:
                for attempt_id in self.feed.poll(self.poll_seconds):
                    outcome = worker.process(attempt_id)
                    logger.info("worker attempt=%s outcome=%s", attempt_id, outcome.value)
                    self.ledger.metrics.inc("ledger_worker_outcomes_total", outcome=outcome.value)
                    if self.ledger.views is not None and self.ledger.projector.project_attempt(
                        attempt_id
                    ):
                        self.ledger.metrics.inc("ledger_projection_updates_total")
            except LedgerError as exc:
                logger.warning("worker step failed: %s", exc.code)
                self.stop_event.wait(self.poll_seconds)
            except Exception as exc:  # keep the loop alive; never log content
                logger.error("worker step failed: %s", type(exc).__name__)
                self.stop_event.wait(self.poll_seconds)

    def _projector_loop(self) -> None:
        assert self.projection_feed is not None
        projector = self.ledger.projector
        # The feed's position has moved past a batch once it is polled, so a stream
        # whose projection fails is kept and retried: a settled attempt never
        # changes again, and its view would otherwise stay stale for good.
        retry: list[str] = []
        while not self.stop_event.is_set():
            try:
                batch = [*retry, *self.projection_feed.poll(0 if retry else self.poll_seconds)]
            except Exception as exc:
                logger.error("projection feed failed: %s", type(exc).__name__)
                self.stop_event.wait(self.poll_seconds)
                continue
            retry = []
            moved = 0
            for stream_id in dict.fromkeys(batch):
                try:
                    moved += projector.project_streams([stream_id])
                except Exception as exc:
                    logger.error("projection step failed: %s", type(exc).__name__)
                    retry.append(stream_id)
            if moved:
                self.ledger.metrics.inc("ledger_projection_updates_total", moved)
            if retry:
                self.stop_event.wait(self.poll_seconds)

    def _recovery_loop(self) -> None:
        worker = make_worker(self.ledger)
        while not self.stop_event.is_set():
            try:
                report = run_recovery(worker)
                for outcome, count in report.outcomes.items():
                    self.ledger.metrics.inc("ledger_recovery_examined_total", count,
                                            outcome=outcome)
                if report.examined:
                    logger.info("recovery examined=%d outcomes=%s", report.examined,
                                dict(report.outcomes))
                if self.on_recovery is not None:
                    self.on_recovery(report)
            except Exception as exc:
                logger.error("recovery tick failed: %s", type(exc).__name__)
            self.stop_event.wait(self.recovery_interval)


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def attempt_streams_from_records(records: list[dict[str, Any]]) -> list[str]:
    """Every attempt and proposal stream a batch of stream records touched (for the
    projector: status views and the inbox)."""
    found: dict[str, None] = {}
    for record in records:
        image = record.get("dynamodb", {}).get("NewImage", {})
        pk = image.get("pk", {}).get("S") if isinstance(image, dict) else None
        if isinstance(pk, str) and pk.startswith((ATTEMPT_ID_PREFIX, PROPOSAL_PREFIX)) and (
                "topic" in image):
            found.setdefault(pk, None)
    return list(found)


def build_runtime(ledger: Ledger, *, worker: bool = True, dynamodb_streams_client: Any = None
                  ) -> Runtime:
    """Worker, projector and recovery loops for the configured store.

    With ``LEDGER_EXECUTION_ENABLED=false`` only the projector runs: nothing is
    leased, and queued work waits in the due-work index until execution is on.
    """
    interval = ledger.settings.recovery_interval_seconds
    executing = worker and ledger.settings.execution_enabled
    streams = dynamodb_streams_client
    feed = build_feed(ledger, dynamodb_streams_client=streams) if executing else None
    projection = build_feed(ledger, dynamodb_streams_client=streams, projection=True)
    return Runtime(ledger, feed, recovery_interval=interval, projection_feed=projection,
                   recovery=executing)


def build_feed(ledger: Ledger, *, dynamodb_streams_client: Any = None,
               projection: bool = False) -> WorkFeed:
    """The worker's (or with ``projection``, the projector's) feed for the store."""
    recorder = ledger.store.recorder
    if isinstance(recorder, ApplicationRecorder):
        if projection:
            return NotificationLogFeed(recorder, topics=())
        return NotificationLogFeed(recorder)
    import boto3

    table = recorder.client.describe_table(  # type: ignore[attr-defined]
        TableName=ledger.settings.dynamodb_table
    )["Table"]
    client = dynamodb_streams_client or boto3.client("dynamodbstreams")
    select = attempt_streams_from_records if projection else work_from_records
    return DynamoDBStreamFeed(client, table["LatestStreamArn"], select)
