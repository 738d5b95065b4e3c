"""Running the worker, the subscribers of the log and the recovery loop in-process.

Each store's backend provides the feeds: the worker is woken by the embedded
notification log or the table's stream (a hint: recovery runs on a fixed
interval and catches anything a feed missed, so a lost wake-up only delays
work). Every subscriber of the log (the status projector first) runs on its
own thread from the position it recorded with its last write, so whatever
was written while no projector ran (a stopped or killed server, `ledger
recover --once`, another process) is applied when it starts.

Attempts run on a pool bounded per executor build and in total
(``adapters/work_pool.py``): the feed and recovery hand attempts to it, and a
slow provider fills only its own build's slots. Webhook deliveries run on one
lane per subscription (``adapters/webhooks/lanes.py``), so a receiver that
hangs delays only its own.

``stop`` is graceful: nothing new is leased, the attempts already running
finish (their executor calls run to their deadline and their results are
recorded), at most for the grace period, and only then do the subscribers
and the webhook lanes stop. What is still running after the grace period is
left to recovery, exactly as after a ``SIGKILL``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

from eventsourcing.persistence import IntegrityError

from adapters.backend import LogReader, WorkFeed
from adapters.bootstrap import Ledger, policy_from_settings
from adapters.housekeeping import housekeeping_loop
from adapters.rebuild import rebuild
from adapters.webhooks.deliverer import Deliverer
from adapters.webhooks.lanes import DeliveryLanes
from adapters.work_pool import WorkPool
from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.errors import LedgerError
from domain.services.execution import Outcome, Worker, WorkerPolicy
from domain.services.recovery import RecoveryReport, run_recovery
from domain.services.restore import settle_pending_restore
from projections.ports import Subscriber
from projections.webhooks import WebhookNotifier

logger = logging.getLogger("ledger.runtime")


def worker_policy(ledger: Ledger) -> WorkerPolicy:
    """The worker policy the settings describe (``Ledger.worker_policy``)."""
    return policy_from_settings(ledger.settings)


def make_worker(ledger: Ledger) -> Worker:
    return ledger.make_worker()


@dataclass
class SubscriberRun:
    """One subscriber, the log it reads, and how a gap in that log is covered."""

    subscriber: Subscriber
    reader: LogReader
    cover_gap: Callable[[], None] | None = None


@dataclass
class StopReport:
    """What a graceful stop left behind: attempts still running when the grace
    period ended (recovery takes them over) and queued hints dropped (never leased)."""

    left_running: int = 0
    dropped: int = 0


class _RecoveryWorker:
    """The worker as recovery's tick sees it: each due entry goes through
    ``hand``, and once the runtime is stopping nothing more is started."""

    def __init__(self, worker: Worker, hand: Callable[[str], Outcome]) -> None:
        self._worker = worker
        self._hand = hand

    def recover(self, attempt_id: str) -> Outcome:
        return self._hand(attempt_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._worker, name)


@dataclass
class Runtime:
    """The worker loop, the subscriber loops and the recovery loop on background threads."""

    ledger: Ledger
    feed: WorkFeed | None
    recovery_interval: float
    subscribers: list[SubscriberRun] = field(default_factory=list)
    recovery: bool = True
    housekeeping: bool = False  # build_runtime turns it on
    poll_seconds: float = 0.2
    stop_event: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    on_recovery: Callable[[RecoveryReport], None] | None = None
    deliverer: Deliverer | None = None
    # None: the worker loop runs each attempt itself, one after another
    pool: WorkPool | None = None
    # set by stop(): lease nothing more (the loops that lease end first)
    draining: threading.Event = field(default_factory=threading.Event)
    _leasing: list[threading.Thread] = field(default_factory=list)
    _lanes: DeliveryLanes | None = None

    def start(self) -> None:
        # A restore recorded but not settled yet is settled before anything leases (I17).
        settle_pending_restore(self.ledger.context, self.ledger.worker_policy())
        if self.feed is not None:
            self._leasing.append(self._spawn("ledger-worker", self._worker_loop))
        if self.deliverer is not None:
            self._lanes = DeliveryLanes(
                self.deliverer,
                self.ledger.webhook_notifiers(),
                self.stop_event,
                poll_seconds=self.poll_seconds,
            )
            self._lanes.start(self._spawn)
        for run in self.subscribers:
            self._spawn(f"ledger-{run.subscriber.name}", partial(self._subscriber_loop, run))
        if self.recovery:
            self._leasing.append(self._spawn("ledger-recovery", self._recovery_loop))
        if self.housekeeping:  # expired lookups, delivered webhook bodies
            self._spawn("ledger-housekeeping", self._housekeeping_loop)

    def stop(self, grace: float | None = None) -> StopReport:
        """Stop leasing, let what runs finish (at most ``grace`` seconds, by
        default ``LEDGER_SHUTDOWN_GRACE_SECONDS``), then stop every loop."""
        if grace is None:
            grace = float(self.ledger.settings.shutdown_grace_seconds)
        deadline = time.monotonic() + max(0.0, grace)

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        report = StopReport()
        self.draining.set()
        if self.pool is not None:
            report.dropped = self.pool.close()
        for thread in self._leasing:
            thread.join(left())
        if self.pool is not None:
            report.left_running = self.pool.wait_running(left())
        else:  # the worker loop runs its attempt itself
            report.left_running = sum(thread.is_alive() for thread in self._leasing)
        self.stop_event.set()
        if self._lanes is not None:
            self._lanes.release()
        for thread in self.threads:
            if thread not in self._leasing:
                thread.join(left())
        if self.deliverer is not None:
            self.deliverer.close()
        if report.left_running:
            logger.warning(
                "stopped with %d attempt(s) still running after the grace period; "
                "recovery takes them over",
                report.left_running,
            )
        return report

    def _stopping(self) -> bool:
        return self.draining.is_set() or self.stop_event.is_set()

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less once the runtime is stopping or draining."""
        end = time.monotonic() + seconds
        while not self._stopping():
            left = end - time.monotonic()
            if left <= 0:
                return
            self.stop_event.wait(min(left, 0.25))

    def _spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)
        return thread

    # -- attempts --------------------------------------------------------------

    def _worker_loop(self) -> None:
        assert self.feed is not None
        worker = make_worker(self.ledger)
        trigger = getattr(self.feed, "trigger", "feed")
        while not self._stopping():
            try:
                for attempt_id in self.feed.poll(self.poll_seconds):
                    if self._stopping():
                        break  # a hint only: the attempt stays queued, recovery finds it
                    if self.pool is None:
                        self._process(worker, attempt_id, trigger)
                    else:
                        self._hand_over(worker, attempt_id, trigger)
            except LedgerError as exc:
                logger.warning("worker step failed: %s", exc.code)
                self.stop_event.wait(self.poll_seconds)
            except Exception as exc:  # keep the loop alive; never log content
                logger.error("worker step failed: %s", type(exc).__name__)
                self.stop_event.wait(self.poll_seconds)

    def _count(self, outcome: Outcome) -> None:
        self.ledger.metrics.inc("ledger_worker_outcomes_total", outcome=outcome.value)

    def _process(self, worker: Worker, attempt_id: str, trigger: str) -> None:
        outcome = worker.process(attempt_id, trigger=trigger)
        logger.info(
            "worker attempt=%s outcome=%s",
            attempt_id,
            outcome.value,
            extra={"attempt_id": attempt_id},
        )
        self._count(outcome)
        self._project(attempt_id)

    def _project(self, attempt_id: str) -> None:
        # Sooner than the subscriber would; the version guard keeps order.
        if self.ledger.projector.project_attempt(attempt_id):
            self.ledger.metrics.inc("ledger_projection_updates_total")

    def _hand_over(self, worker: Worker, attempt_id: str, trigger: str) -> None:
        """A hint from the feed: queue the attempt behind its build's bound."""
        attempt = worker.ctx.store.get(ExecutionAttempt, attempt_id)
        if attempt is None or attempt.status is not AttemptStatus.QUEUED:
            self._count(Outcome.MISSING if attempt is None else Outcome.SKIPPED)
            return

        def step() -> None:
            try:
                self._process(worker, attempt_id, trigger)
            except LedgerError as exc:
                logger.warning("worker step failed: %s", exc.code)

        self.pool_submit(attempt, step)

    def pool_submit(self, attempt: ExecutionAttempt, step: Callable[[], None]) -> bool:
        assert self.pool is not None
        return self.pool.submit(attempt.id, (attempt.capability, attempt.executor_build), step)

    def _recover_through_pool(self, worker: Worker, attempt_id: str) -> Outcome:
        """A due entry: handed to the pool, where its build's bound applies; its
        outcome is counted when it has run."""
        assert self.pool is not None
        if self.pool.holds(attempt_id):
            return Outcome.SKIPPED  # queued or running here already
        attempt = worker.ctx.store.get(ExecutionAttempt, attempt_id)
        if attempt is None:
            return Outcome.MISSING

        def step() -> None:
            try:
                outcome = worker.recover(attempt_id).value
            except LedgerError as exc:
                logger.warning("recovery step failed: %s", exc.code)
                outcome = "error"
            self.ledger.metrics.inc("ledger_recovery_examined_total", outcome=outcome)
            if outcome != Outcome.SKIPPED.value:
                logger.info("recovery attempt=%s outcome=%s", attempt_id, outcome)
                self._project(attempt_id)

        return Outcome.SCHEDULED if self.pool_submit(attempt, step) else Outcome.SKIPPED

    def _recovery_loop(self) -> None:
        worker = make_worker(self.ledger)

        def hand(attempt_id: str) -> Outcome:
            if self._stopping():
                return Outcome.SKIPPED  # stays due: the next process's recovery takes it
            if self.pool is not None:
                return self._recover_through_pool(worker, attempt_id)
            return worker.recover(attempt_id)

        ticking = cast(Worker, _RecoveryWorker(worker, hand))
        while not self._stopping():
            try:
                report = run_recovery(ticking)
                for outcome, count in report.outcomes.items():
                    if outcome != Outcome.SCHEDULED.value:  # counted when they run
                        self.ledger.metrics.inc(
                            "ledger_recovery_examined_total", count, outcome=outcome
                        )
                if report.examined:
                    logger.info(
                        "recovery examined=%d outcomes=%s", report.examined, dict(report.outcomes)
                    )
                if self.on_recovery is not None:
                    self.on_recovery(report)
            except Exception as exc:
                logger.error("recovery tick failed: %s", type(exc).__name__)
            self._pause(self.recovery_interval)

    def _housekeeping_loop(self) -> None:
        housekeeping_loop(self.ledger, self.stop_event, self.recovery_interval, self.poll_seconds)

    def wait_idle(self, timeout: float) -> bool:
        """True once the pool has nothing queued or running (at most ``timeout`` s)."""
        return self.pool is None or self.pool.wait_idle(timeout)

    # -- subscribers of the log ------------------------------------------------

    def run_subscriber_once(self, run: SubscriberRun) -> bool:
        """One step of a subscriber: cover any gap, apply the next batch and its
        position atomically. False when it is caught up."""
        name = run.subscriber.name
        gaps = run.reader.take_gaps()
        if gaps:
            logger.warning(
                "subscriber %s: %d part(s) of the log were lost before being read; rebuilding",
                name,
                len(gaps),
            )
            if run.cover_gap is not None:
                run.cover_gap()
            self.ledger.metrics.inc("ledger_projection_rebuilds_total", subscriber=name)
        batch = run.reader.poll()
        if batch is None:
            return False
        try:
            moved = run.subscriber.apply(batch)
        except IntegrityError:
            # Another process recorded a further position: resume from it.
            run.reader.reset()
            return True
        run.reader.advance(batch)
        if moved:
            self.ledger.metrics.inc("ledger_projection_updates_total", moved)
            if self._lanes is not None:
                self._lanes.wake(name)  # new delivery records: the lane sends them now
        return True

    def _subscriber_loop(self, run: SubscriberRun) -> None:
        while not self.stop_event.is_set():
            try:
                if not self.run_subscriber_once(run):
                    self.stop_event.wait(self.poll_seconds)
            except Exception as exc:
                # Nothing of the failed batch was recorded: read it again.
                logger.error(
                    "subscriber %s step failed: %s", run.subscriber.name, type(exc).__name__
                )
                self.stop_event.wait(self.poll_seconds)
                try:
                    run.reader.reset()
                except Exception as again:
                    logger.error(
                        "subscriber %s reset failed: %s", run.subscriber.name, type(again).__name__
                    )


def subscriber_runs(ledger: Ledger) -> list[SubscriberRun]:
    """Every subscriber of the ledger with its log reader (from its recorded position)."""
    runs: list[SubscriberRun] = []
    for subscriber in ledger.subscribers():
        cover: Callable[[], None] | None = None
        if subscriber.name == ledger.projector.name:

            def cover() -> None:
                report = rebuild(ledger, "status", force=False)
                logger.warning(
                    "status views rebuilt after a gap: %d attempts, %d changed",
                    report.total,
                    len(report.changed),
                )

        reader = ledger.backend.log_reader(subscriber.name)
        if isinstance(subscriber, WebhookNotifier) and subscriber.start_now:
            reader.start_from_end([subscriber.start_row()])  # a new one: from now on
        runs.append(SubscriberRun(subscriber, reader, cover))
    return runs


def build_runtime(ledger: Ledger, *, worker: bool = True) -> Runtime:
    """Worker, subscribers and recovery loops for the configured store.

    With ``LEDGER_EXECUTION_ENABLED=false`` only the subscribers run: nothing
    is leased, and queued work waits in the due-work index until execution is on.
    """
    settings = ledger.settings
    executing = worker and settings.execution_enabled
    feed = ledger.backend.work_feed() if executing else None
    pool = (
        WorkPool(total=settings.worker_concurrency, per_build=settings.worker_concurrency_per_build)
        if executing
        else None
    )
    return Runtime(
        ledger,
        feed,
        recovery_interval=settings.recovery_interval_seconds,
        subscribers=subscriber_runs(ledger),
        recovery=executing,
        housekeeping=True,
        deliverer=ledger.make_deliverer() if ledger.webhooks else None,
        pool=pool,
    )
