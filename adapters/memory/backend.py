"""The in-memory backend (tests, `LEDGER_STORE=memory`): nothing survives the process."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from adapters.backend import (
    Backend,
    Lag,
    LogSubscription,
    NotificationLogFeed,
    NotificationLogSubscription,
    WorkFeed,
    notification_lag,
)
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.memory.views import MemoryViewStore
from adapters.store import make_mapper
from domain.spec import ATTEMPT_ID_PREFIX


class MemoryBackend(Backend):
    """Recorder and views in dicts; the notification log feeds the subscribers."""

    kind = "memory"

    def __init__(self, recorder: MemoryLedgerRecorder | None = None,
                 views: MemoryViewStore | None = None) -> None:
        self.recorder: MemoryLedgerRecorder = recorder or MemoryLedgerRecorder()
        self.views: MemoryViewStore = views or MemoryViewStore()
        self._mapper = make_mapper()
        self._subscriptions: dict[str, NotificationLogSubscription] = {}

    def reopen(self) -> MemoryBackend:
        return MemoryBackend(self.recorder, self.views)

    def work_feed(self) -> WorkFeed:
        return NotificationLogFeed(self.recorder)

    def subscription(self, name: str) -> LogSubscription:
        if name not in self._subscriptions:
            self._subscriptions[name] = NotificationLogSubscription(
                name, self.recorder, self.views, self._mapper)
        return self._subscriptions[name]

    def attempt_ids(self) -> Iterator[str]:
        yield from self.recorder.stream_ids(ATTEMPT_ID_PREFIX)

    def lag(self, name: str, now: datetime) -> Lag | None:
        return notification_lag(name, self.recorder, self.views, self._mapper, now)
