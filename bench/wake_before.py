"""The embedded work feed as it was before the commit signal, kept runnable for
``bench_wake.py`` only (never imported by the ledger): with nothing new in the
notification log it sleeps its whole poll interval, so work committed in the
same process waits for the next poll."""

from __future__ import annotations

import time

from eventsourcing.persistence import ApplicationRecorder

from adapters.backend import BATCH_LIMIT, NotificationLogBackend, WorkFeed
from adapters.streams import WORK_TOPICS


class SleepingFeed:
    """The notification-log feed that sleeps out ``wait_seconds`` when caught up."""

    trigger = "notification"

    def __init__(self, recorder: ApplicationRecorder) -> None:
        self.recorder = recorder
        self.topics = sorted(WORK_TOPICS)
        self.position = recorder.max_notification_id() or 0

    def poll(self, wait_seconds: float) -> list[str]:
        notifications = self.recorder.select_notifications(
            start=self.position, limit=BATCH_LIMIT, topics=self.topics, inclusive_of_start=False
        )
        if not notifications:
            time.sleep(wait_seconds)
            return []
        self.position = notifications[-1].id
        return list(dict.fromkeys(str(n.originator_id) for n in notifications))


def install() -> None:
    """Make every embedded backend of this process hand out the sleeping feed."""

    def work_feed(self: NotificationLogBackend) -> WorkFeed:
        return SleepingFeed(self._log())

    NotificationLogBackend.work_feed = work_feed  # type: ignore[method-assign]
