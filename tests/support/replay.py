"""Replay check for I9: an aggregate rebuilt from its stored events equals the live one.

Every event goes the way the stores take it: ``Mapper.to_stored_event`` (JSON
bytes), then ``Mapper.to_domain_event``, then ``mutate``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from adapters.store import make_mapper
from domain.base import LedgerAggregate

A = TypeVar("A", bound=LedgerAggregate)


def state_of(aggregate: LedgerAggregate) -> dict[str, Any]:
    """Everything an aggregate holds except its not-yet-collected events."""
    return {k: v for k, v in vars(aggregate).items() if k != "_pending_events"}


class Replay:
    """Tracks aggregates; :meth:`check` rebuilds each from all its events so far."""

    def __init__(self) -> None:
        self.mapper = make_mapper()
        self._tracked: list[tuple[LedgerAggregate, list[Any]]] = []

    def track(self, aggregate: A) -> A:
        self._tracked.append((aggregate, []))
        return aggregate

    def events_of(self, aggregate: LedgerAggregate) -> list[Any]:
        """All events of a tracked aggregate, collected so far and pending."""
        for tracked, history in self._tracked:
            if tracked is aggregate:
                history.extend(aggregate.collect_events())
                return list(history)
        raise KeyError("aggregate is not tracked")

    def rebuild(self, aggregate: A) -> A:
        rebuilt: LedgerAggregate | None = None
        for domain_event in self.events_of(aggregate):
            stored = self.mapper.to_stored_event(domain_event)
            rebuilt = self.mapper.to_domain_event(stored).mutate(rebuilt)  # type: ignore[attr-defined]
        assert rebuilt is not None, "no events to replay"
        assert type(rebuilt) is type(aggregate)
        return rebuilt  # type: ignore[return-value]

    def check(self) -> None:
        """Assert every tracked aggregate replays to exactly its current state."""
        for aggregate, _ in self._tracked:
            rebuilt = self.rebuild(aggregate)
            assert state_of(rebuilt) == state_of(aggregate), (
                f"replay of {aggregate.id} differs from the live aggregate"
            )
