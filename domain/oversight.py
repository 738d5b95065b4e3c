"""What admins looked at: every reveal of an approved preview, one stream per attempt.

The rendered preview of an approved version (what the person approving saw)
holds the spec's content, which no status, list, log or audit answer shows
(I10). An admin may still need it at 3 a.m.; the console shows it only behind
an explicit "Reveal", and each reveal is first recorded here (who, when, which
attempt) in the hash-chained log, so it is audited like any other fact.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.base import LedgerAggregate

REVEALS_PREFIX = "reveals-"


def reveals_id(attempt_id: str) -> str:
    """The stream of the reveals of one attempt's preview."""
    return REVEALS_PREFIX + attempt_id


class PreviewReveals(LedgerAggregate):
    """The reveals of one attempt's approved preview, oldest first."""

    @staticmethod
    def create_id(attempt_id: str, **_: Any) -> str:
        return reveals_id(attempt_id)

    @event("RevealsOpened")
    def __init__(self, attempt_id: str, at: str) -> None:
        self.attempt_id = attempt_id
        self.reveals: list[dict[str, str]] = []

    def reveal(self, *, by: str, at: str) -> None:
        """Record that ``by`` is shown the preview now."""
        self._revealed(by=by, attempt_id=self.attempt_id, at=at)

    @event("PreviewRevealed")
    def _revealed(self, by: str, attempt_id: str, at: str) -> None:
        self.reveals = [*self.reveals, {"by": by, "at": at}]
