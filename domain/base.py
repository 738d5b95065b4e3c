"""Base classes for string-identified, event-sourced aggregates.

The eventsourcing library's ``Aggregate`` is keyed by UUID; every stream here
has a readable, deterministic string id (``actor:alice``, ``att_<hex>``), so
the event and aggregate bases are declared once for ``str`` ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from eventsourcing.domain import (
    BaseAggregate,
    CanCreateTimestamp,
    CanInitAggregate,
    CanMutateAggregate,
    MetaDomainEvent,
)


@dataclass(frozen=True)
class LedgerEvent(CanMutateAggregate[str], CanCreateTimestamp, metaclass=MetaDomainEvent):
    """An immutable fact appended to one stream at one version."""

    originator_id: str
    originator_version: int
    timestamp: datetime


@dataclass(frozen=True)
class LedgerCreated(CanInitAggregate[str], LedgerEvent):
    """The first event of a stream; it names the aggregate class."""

    originator_topic: str


class LedgerAggregate(BaseAggregate[str]):
    """An aggregate whose id is a string chosen by the domain."""

    class Event(LedgerEvent):
        pass

    class Created(Event, LedgerCreated):
        pass

    @property
    def revision(self) -> int:
        """The stream version: what callers pass back as ``expected_revision``."""
        return self.version
