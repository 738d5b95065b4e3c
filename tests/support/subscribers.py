"""Tracked subscribers under test: run them until caught up, restart them as a new
process would, and make them die right after (or instead of) their write."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.persistence import Tracking

from adapters.bootstrap import Ledger, build_ledger
from adapters.runtime import Runtime, subscriber_runs
from projections.ports import LogBatch, TrackedViewStore, ViewRecord


class SimulatedCrash(Exception):
    """The process died here."""


def restarted(ledger: Ledger) -> Ledger:
    """The same store (and webhook subscriptions) seen by a new process: a new backend
    on the same data whose log readers read their positions from the store."""
    assert ledger.backend is not None
    again = build_ledger(ledger.settings, backend=ledger.backend.reopen(), clock=ledger.clock)
    again.webhooks = list(ledger.webhooks)
    return again


def drain(ledger: Ledger) -> int:
    """Run every subscriber until it is caught up (what its thread does); steps taken."""
    runtime = Runtime(ledger, None, recovery_interval=3600, recovery=False, poll_seconds=0)
    steps = 0
    for run in subscriber_runs(ledger):
        while runtime.run_subscriber_once(run):
            steps += 1
            assert steps < 1000
    return steps


def streams_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "dynamodbstreams",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


class CrashAfterApply:
    """A log reader whose process dies right after the subscriber's write: of the
    first batch, or with ``when``, of the first batch ``when`` holds for (the
    batches before it are taken as usual). A stream reader's batch may hold only
    records the test does not care about (a striped directory record is many
    stream records), so a test that crashes after its own writes says which."""

    def __init__(self, inner: Any, when: Callable[[LogBatch], bool] | None = None) -> None:
        self.inner = inner
        self.when = when

    def advance(self, batch: LogBatch) -> None:
        if self.when is not None and not self.when(batch):
            self.inner.advance(batch)
            return
        raise SimulatedCrash()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FailingWrites:
    """A tracked view store whose tracked writes fail."""

    def __init__(self, inner: TrackedViewStore) -> None:
        self.inner = inner

    def put_views(self, records: Sequence[ViewRecord], tracking: Sequence[Tracking]) -> int:
        raise SimulatedCrash()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
