"""/metrics: counters with bounded labels, never ids or content."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from adapters.metrics import Metrics
from tests.e2e.helpers import Headers
from tests.e2e.test_lifecycle_http import API, directory, propose_and_present

__all__ = ["directory"]


@pytest.mark.usefixtures("directory")
def test_metrics_count_approvals_without_revealing_anything(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    token = propose_and_present(client, bearer)
    accepted = client.post(f"{API}/approvals", json={"token": token}, headers=bearer("channel"))
    client.post(f"{API}/approvals", json={"token": "wrong"}, headers=bearer("channel"))
    page = client.get("/metrics")
    assert page.status_code == 200
    assert 'ledger_approvals_total{reason="none",result="accepted"} 1' in page.text
    assert 'ledger_approvals_total{reason="unknown_token",result="denied"} 1' in page.text
    assert accepted.json()["attempt_id"] not in page.text
    assert token not in page.text


def test_label_values_outside_the_safe_alphabet_are_folded() -> None:
    metrics = Metrics()
    metrics.inc("ledger_worker_outcomes_total", outcome="sk_live_ABC/../x y")
    assert 'outcome="other"' in metrics.render()
    assert "sk_live" not in metrics.render()
