"""Running the worker, the subscribers of the log and the recovery loop in-process.

Each store's backend provides the feeds: the worker is woken by the embedded
notification log or the table's stream (a hint: recovery runs on a fixed
interval and catches anything a feed missed, so a lost wake-up only delays
work). Every subscriber of the log (the status projector first) runs on its
own thread from the position it recorded with its last write, so whatever
was written while no projector ran (a stopped or killed server, `ledger
recover --once`, another process) is applied when it starts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from eventsourcing.persistence import IntegrityError

from adapters.backend import LogSubscription, WorkFeed
from adapters.bootstrap import Ledger, policy_from_settings
from adapters.rebuild import rebuild
from adapters.webhooks.deliverer import Deliverer
from domain.errors import LedgerError
from domain.services.execution import Worker, WorkerPolicy
from domain.services.recovery import RecoveryReport, run_recovery
from domain.services.restore import settle_pending_restore
from projections.ports import Subscriber

logger = logging.getLogger("ledger.runtime")
DELIVER_IDLE_SECONDS = 1.0


def worker_policy(ledger: Ledger) -> WorkerPolicy:
    """The worker policy the settings describe (``Ledger.worker_policy``)."""
    return policy_from_settings(ledger.settings)


def make_worker(ledger: Ledger) -> Worker:
    return ledger.make_worker()


@dataclass
class SubscriberRun:
    """One subscriber, the log it reads, and how a gap in that log is covered."""

    subscriber: Subscriber
    subscription: LogSubscription
    cover_gap: Callable[[], None] | None = None


@dataclass
class Runtime:
    """The worker loop, the subscriber loops and the recovery loop on background threads."""

    ledger: Ledger
    feed: WorkFeed | None
    recovery_interval: float
    subscribers: list[SubscriberRun] = field(default_factory=list)
    recovery: bool = True
    poll_seconds: float = 0.2
    stop_event: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    on_recovery: Callable[[RecoveryReport], None] | None = None
    deliverer: Deliverer | None = None

    def start(self) -> None:
        # A restore recorded but not settled yet is settled before anything leases (I17).
        settle_pending_restore(self.ledger.context, self.ledger.worker_policy())
        if self.feed is not None:
            self._spawn("ledger-worker", self._worker_loop)
        if self.deliverer is not None:
            self._spawn("ledger-webhooks", self._deliver_loop)
        for run in self.subscribers:
            self._spawn(f"ledger-{run.subscriber.name}", partial(self._subscriber_loop, run))
        if self.recovery:
            self._spawn("ledger-recovery", self._recovery_loop)

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout)
        if self.deliverer is not None:
            self.deliverer.close()

    def _deliver_loop(self) -> None:
        assert self.deliverer is not None
        while not self.stop_event.is_set():
            try:
                for notifier in self.ledger.webhook_notifiers():
                    notifier.sweep_expired()  # proposal.expired comes from the clock
                if not self.deliverer.run_once():
                    # Each pass lists the outstanding deliveries: when nothing was
                    # due, wait longer than the subscribers do (a store query a second).
                    self.stop_event.wait(max(self.poll_seconds, DELIVER_IDLE_SECONDS))
            except Exception as exc:  # the store was unavailable: try again later
                logger.error("webhook delivery pass failed: %s", type(exc).__name__)
                self.stop_event.wait(self.poll_seconds)

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
                    outcome = worker.process(
                        attempt_id, trigger=getattr(self.feed, "trigger", "feed")
                    )
                    logger.info(
                        "worker attempt=%s outcome=%s",
                        attempt_id,
                        outcome.value,
                        extra={"attempt_id": attempt_id},
                    )
                    self.ledger.metrics.inc("ledger_worker_outcomes_total", outcome=outcome.value)
                    # Sooner than the subscriber would; the version guard keeps order.
                    if self.ledger.projector.project_attempt(attempt_id):
                        self.ledger.metrics.inc("ledger_projection_updates_total")
            except LedgerError as exc:
                logger.warning("worker step failed: %s", exc.code)
                self.stop_event.wait(self.poll_seconds)
            except Exception as exc:  # keep the loop alive; never log content
                logger.error("worker step failed: %s", type(exc).__name__)
                self.stop_event.wait(self.poll_seconds)

    def run_subscriber_once(self, run: SubscriberRun) -> bool:
        """One step of a subscriber: cover any gap, apply the next batch and its
        position atomically. False when it is caught up."""
        name = run.subscriber.name
        gaps = run.subscription.take_gaps()
        if gaps:
            logger.warning(
                "subscriber %s: %d part(s) of the log were lost before being read; rebuilding",
                name,
                len(gaps),
            )
            if run.cover_gap is not None:
                run.cover_gap()
            self.ledger.metrics.inc("ledger_projection_rebuilds_total", subscriber=name)
        batch = run.subscription.poll()
        if batch is None:
            return False
        try:
            moved = run.subscriber.apply(batch)
        except IntegrityError:
            # Another process recorded a further position: resume from it.
            run.subscription.reset()
            return True
        run.subscription.advance(batch)
        if moved:
            self.ledger.metrics.inc("ledger_projection_updates_total", moved)
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
                    run.subscription.reset()
                except Exception as again:
                    logger.error(
                        "subscriber %s reset failed: %s", run.subscriber.name, type(again).__name__
                    )

    def _recovery_loop(self) -> None:
        worker = make_worker(self.ledger)
        while not self.stop_event.is_set():
            try:
                report = run_recovery(worker)
                for outcome, count in report.outcomes.items():
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
            self.stop_event.wait(self.recovery_interval)


def subscriber_runs(ledger: Ledger) -> list[SubscriberRun]:
    """Every subscriber of the ledger with its tracked subscription."""
    assert ledger.backend is not None
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

        runs.append(SubscriberRun(subscriber, ledger.backend.subscription(subscriber.name), cover))
    return runs


def build_runtime(ledger: Ledger, *, worker: bool = True) -> Runtime:
    """Worker, subscribers and recovery loops for the configured store.

    With ``LEDGER_EXECUTION_ENABLED=false`` only the subscribers run: nothing
    is leased, and queued work waits in the due-work index until execution is on.
    """
    assert ledger.backend is not None
    executing = worker and ledger.settings.execution_enabled
    feed = ledger.backend.work_feed() if executing else None
    return Runtime(
        ledger,
        feed,
        recovery_interval=ledger.settings.recovery_interval_seconds,
        subscribers=subscriber_runs(ledger),
        recovery=executing,
        deliverer=ledger.make_deliverer() if ledger.webhooks else None,
    )
