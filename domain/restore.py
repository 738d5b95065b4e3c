"""The restore log: every time the store was put back to an earlier state (I17).

A backup can be older than what happened: an attempt dispatched after it looks
queued again in the restored store. So a restore is recorded, in one stream
(``ledger-restores``), by the command that restores (``ledger restore``), or
when the store is found behind the last audit checkpoint. A recorded restore is
pending until every attempt that was unsettled at the restored point was marked
``PossiblyDispatched`` (``domain.services.restore``); then it is settled.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from eventsourcing.domain import event

from domain.base import LedgerAggregate

RESTORE_LOG_ID = "ledger-restores"


class RestoreSource(StrEnum):
    """Who recorded a restore."""

    COMMAND = "command"  # `ledger restore BACKUP`: the file was put back by the ledger
    MARK = "mark"  # `ledger restore --mark`: put back by other means (a PITR restore)
    CHECKPOINT = "checkpoint"  # the store was found behind the last audit checkpoint


class RestoreLog(LedgerAggregate):
    """The restores of this ledger, and which of them were settled."""

    @staticmethod
    def create_id(log_id: str = RESTORE_LOG_ID, **_: Any) -> str:
        return log_id

    @event("RestoreLogOpened")
    def __init__(self, at: str, log_id: str = RESTORE_LOG_ID) -> None:
        self.restores: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []

    def record(
        self, *, restore_id: str, source: RestoreSource, at: str, lost: dict[str, Any] | None
    ) -> None:
        """A restore happened; ``lost`` summarizes what a checkpoint says it lost."""
        self._restored(restore_id=restore_id, source=source.value, lost=lost, at=at)

    @event("BackupRestored")
    def _restored(self, restore_id: str, source: str, lost: dict[str, Any] | None, at: str) -> None:
        self.restores[restore_id] = {"source": source, "lost": lost, "at": at, "settled": None}
        self.order = [*self.order, restore_id]

    def settle(self, *, restore_id: str, marked: dict[str, int], at: str) -> None:
        """Every attempt unsettled at the restored point is marked (counts by mode)."""
        self._settled(restore_id=restore_id, marked=dict(marked), at=at)

    @event("RestoreSettled")
    def _settled(self, restore_id: str, marked: dict[str, int], at: str) -> None:
        self.restores[restore_id] = {**self.restores[restore_id], "settled": at, "marked": marked}

    @property
    def pending(self) -> str | None:
        """The oldest restore whose attempts are not all marked yet, if any."""
        for restore_id in self.order:
            if self.restores[restore_id]["settled"] is None:
                return restore_id
        return None

    @property
    def latest(self) -> dict[str, Any] | None:
        """The newest restore, with its id."""
        if not self.order:
            return None
        return {"restore_id": self.order[-1], **self.restores[self.order[-1]]}
