"""The load scenario in its CI size (the full 100-proposal run: ``make chaos``)."""

from __future__ import annotations

import os

import pytest

from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.store import LedgerStore
from tests.hardening.load import APPROVERS, run_load

pytestmark = [pytest.mark.dynamodb, pytest.mark.slow]

PROPOSALS = int(os.environ.get("LEDGER_LOAD_PROPOSALS", "8"))


def test_concurrent_approvals_and_crashing_workers_lose_nothing_and_duplicate_nothing(
    dynamodb_recorder: DynamoDBLedgerRecorder,
) -> None:
    report = run_load(LedgerStore(dynamodb_recorder), proposals=PROPOSALS, seed=11)
    print("\n".join(report.lines()))
    assert report.approval_requests == PROPOSALS * APPROVERS
    assert report.attempts == PROPOSALS
    assert report.events_written == report.events_found > 0
    assert report.accepted + report.refused == report.approval_requests
    assert sum(report.statuses.values()) == PROPOSALS
    assert report.worker_crashes > 0
    assert {"after_lease", "after_dispatch_marker"} <= set(report.crashes)
