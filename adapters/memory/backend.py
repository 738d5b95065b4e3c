"""The in-memory backend (tests, `LEDGER_STORE=memory`): nothing survives the process."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventsourcing.persistence import ApplicationRecorder

from adapters.backend import NotificationLogBackend, NotificationLogReader
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.memory.views import MemoryViewStore
from adapters.store import make_mapper

if TYPE_CHECKING:
    from adapters.settings import Settings


class MemoryBackend(NotificationLogBackend):
    """Recorder and views in dicts; the notification log feeds the subscribers."""

    kind = "memory"

    def __init__(
        self, recorder: MemoryLedgerRecorder | None = None, views: MemoryViewStore | None = None
    ) -> None:
        self.recorder: MemoryLedgerRecorder = recorder or MemoryLedgerRecorder()
        self.views: MemoryViewStore = views or MemoryViewStore()
        self._mapper = make_mapper()
        self._readers: dict[str, NotificationLogReader] = {}

    @classmethod
    def from_settings(cls, settings: Settings, **_clients: object) -> MemoryBackend:
        return cls()

    def describe(self) -> str:
        return "memory (nothing is kept after exit)"

    def _log(self) -> ApplicationRecorder:
        return self.recorder

    def reopen(self) -> MemoryBackend:
        return MemoryBackend(self.recorder, self.views)
