"""/metrics: prometheus_client, bounded labels, for an authorized scraper only.

Regression (hardening 14.4): the page needed no token and counted approval
refusals by reason, so a channel could tell "unknown token" from "someone
else's token" and undo the uniform 404.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from adapters.bootstrap import Ledger
from adapters.metrics import METRIC_NAMES, Metrics
from tests.support.http_helpers import API, PROVENANCE, Headers, propose_and_present


def scrape(client: TestClient, bearer: Callable[..., Headers]) -> dict[str, float]:
    page = client.get("/metrics", headers=bearer("metrics", subject="prometheus"))
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        sample.name
        + "{"
        + ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
        + "}": sample.value
        for family in text_string_to_metric_families(page.text)
        for sample in family.samples
    }


@pytest.mark.parametrize("role", [None, "channel", "actor", "proposer", "admin"])
def test_metrics_need_a_metrics_role_token(
    client: TestClient, bearer: Callable[..., Headers], role: str | None
) -> None:
    headers = {} if role is None else bearer(role)
    answer = client.get("/metrics", headers=headers)
    assert answer.status_code == (401 if role is None else 403)
    assert "ledger_" not in answer.text


@pytest.mark.usefixtures("directory")
def test_refusals_are_not_labelled_by_a_reason_the_uniform_answer_hides(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    token = propose_and_present(client, bearer)
    other = dataclasses.replace(PROVENANCE, conversation_key="C-elsewhere")
    before = scrape(client, bearer)
    unknown = client.post(f"{API}/approvals", json={"token": "x" * 43}, headers=bearer("channel"))
    after_unknown = scrape(client, bearer)
    someone_elses = client.post(
        f"{API}/approvals", json={"token": token}, headers=bearer("channel", provenance=other)
    )
    after_someone_elses = scrape(client, bearer)
    assert unknown.status_code == someone_elses.status_code == 404
    assert unknown.content == someone_elses.content

    def moved(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {
            k: b[k] - a.get(k, 0.0)
            for k in b
            if k.startswith("ledger_approvals") and b[k] != a.get(k, 0.0)
        }

    # The two refusals move exactly the same series by the same amount.
    assert (
        moved(before, after_unknown)
        == moved(after_unknown, after_someone_elses)
        == {"ledger_approvals_total{result=refused}": 1.0}
    )
    accepted = client.post(f"{API}/approvals", json={"token": token}, headers=bearer("channel"))
    assert accepted.status_code == 202
    text = client.get("/metrics", headers=bearer("metrics")).text
    assert 'ledger_approvals_total{result="accepted"} 1.0' in text
    assert "reason=" not in text
    assert accepted.json()["attempt_id"] not in text and token not in text


@pytest.mark.usefixtures("directory")
def test_latency_is_labelled_by_route_template_and_gauges_read_the_views(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    token = propose_and_present(client, bearer)
    attempt_id = client.post(
        f"{API}/approvals", json={"token": token}, headers=bearer("channel")
    ).json()["attempt_id"]
    client.get(f"{API}/execution-attempts/{attempt_id}", headers=bearer("admin"))
    client.get("/no/such/path/sk_live_NOTALABEL")
    ledger.projector.project_attempt(attempt_id)
    samples = scrape(client, bearer)
    route = f"{API}/execution-attempts/{{attempt_id}}"
    assert (
        samples[
            f"ledger_http_request_duration_seconds_count{{method=GET,route={route},status=2xx}}"
        ]
        == 1
    )
    assert (
        samples["ledger_http_request_duration_seconds_count{method=GET,route=other,status=4xx}"]
        == 1
    )
    assert samples["ledger_attempts{status=queued}"] == 1
    assert samples["ledger_attempts_outcome_unknown{}"] == 0
    assert samples["ledger_due_work_backlog{}"] == 1  # queued now: due at once
    assert samples["ledger_gauges_up{}"] == 1
    page = client.get("/metrics", headers=bearer("metrics")).text
    assert attempt_id not in page and "sk_live" not in page
    for name in re.findall(r"^# TYPE (\S+)", page, flags=re.MULTILINE):
        assert name.startswith("ledger_"), name


def test_every_exported_name_is_documented_in_the_readme() -> None:
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    missing = [name for name in METRIC_NAMES if name not in readme]
    assert not missing, missing


def test_label_values_outside_the_safe_alphabet_are_folded() -> None:
    metrics = Metrics()
    metrics.inc("ledger_worker_outcomes_total", outcome="sk_live_ABC/../x y")
    assert 'outcome="other"' in metrics.render()
    assert "sk_live" not in metrics.render()


def test_a_failing_gauge_source_reports_down_instead_of_failing_the_scrape() -> None:
    metrics = Metrics()

    def broken() -> list[object]:
        raise OSError("store down")

    metrics.add_gauge_source(broken)  # type: ignore[arg-type]
    assert metrics.value("ledger_gauges_up") == 0.0


def test_metrics_show_the_projection_lag(
    client: TestClient, bearer: Callable[..., Headers]
) -> None:
    text = client.get("/metrics", headers=bearer("metrics")).text
    assert "# TYPE ledger_projection_events_behind gauge" in text
    assert 'ledger_projection_events_behind{subscriber="status"} 0' in text
    assert 'ledger_projection_oldest_unprocessed_age_seconds{subscriber="status"} 0' in text
