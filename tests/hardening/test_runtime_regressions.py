"""Regressions in the in-process runtime loops, found while hardening views."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from adapters.bootstrap import build_ledger
from adapters.runtime import Runtime
from adapters.settings import load_settings
from domain.errors import StoreUnavailable
from projections.ports import ViewRecord, ViewStore
from projections.status import STATUS_VIEW
from tests.integration.execution.crash import ExecutionWorld


class ScriptedFeed:
    """Hands out the given batches once, then stops the runtime."""

    def __init__(self, batches: list[list[str]], stop: threading.Event) -> None:
        self.batches = batches
        self.stop = stop
        self.polls = 0

    def poll(self, wait_seconds: float) -> list[str]:
        self.polls += 1
        if self.batches:
            return self.batches.pop(0)
        if self.polls > 5:
            self.stop.set()
        return []


class FailsOnceFor:
    """A view store whose first write of one key fails (a transient outage)."""

    def __init__(self, inner: ViewStore, key: str) -> None:
        self.inner = inner
        self.key = key
        self.failed = False

    def get_view(self, name: str, key: str) -> ViewRecord | None:
        return self.inner.get_view(name, key)

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        if record.key == self.key and not self.failed:
            self.failed = True
            raise StoreUnavailable()
        return self.inner.put_view(record, force=force)

    def list_views(self, list_pk: str, limit: int,
                   cursor: str | None = None) -> tuple[Sequence[ViewRecord], str | None]:
        return self.inner.list_views(list_pk, limit, cursor)


def test_a_transient_view_failure_does_not_drop_the_rest_of_the_batch() -> None:
    """The projector loop took a whole batch from its feed (whose position had
    already moved on) and one failing stream aborted it: every later stream of
    the batch kept a stale view until it changed again, which a settled attempt
    never does. A failed stream is retried; the others are projected."""
    ledger = build_ledger(load_settings(store="memory", env="test"))
    assert ledger.effects is not None
    world = ExecutionWorld(ledger.store, registry=ledger.registry, effects=ledger.effects)
    first = world.approved("provider_idempotency")
    second = world.approved("provider_idempotency")
    assert ledger.views is not None
    ledger.views = FailsOnceFor(ledger.views, first)
    runtime = Runtime(ledger, None, recovery_interval=3600, recovery=False, poll_seconds=0)
    runtime.projection_feed = ScriptedFeed([[first, second]], runtime.stop_event)
    runtime.start()
    for thread in runtime.threads:  # the feed stops the loop once it has run dry
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in runtime.threads)

    for attempt_id in (first, second):
        view = ledger.views.get_view(STATUS_VIEW, attempt_id)
        assert view is not None, attempt_id
        assert view.data["status"] == "queued"
