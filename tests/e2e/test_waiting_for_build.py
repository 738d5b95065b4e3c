"""An attempt that waits too long for a worker with its build is visible: on the
admin list (``status=waiting_for_build``), on the console's attention page and as
a gauge, each item its ordinary redacted status view."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.executors.fake import fake_build_digest
from adapters.settings import Settings
from api.http.schemas.attempts import AttemptOut
from tests.support.clocks import FixedClock
from tests.support.console import admin_session
from tests.support.http_helpers import API, Headers, propose_and_present, run_worker


def gauge(client: TestClient, bearer: Callable[..., Headers]) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    page = client.get("/metrics", headers=bearer("metrics", subject="prometheus"))
    assert page.status_code == 200, page.text
    (value,) = [
        sample.value
        for family in text_string_to_metric_families(page.text)
        for sample in family.samples
        if sample.name == "ledger_attempts_waiting_for_build"
    ]
    return value


def waiting(client: TestClient, admin: Headers) -> list[str]:
    answer = client.get(
        f"{API}/execution-attempts", params={"status": "waiting_for_build"}, headers=admin
    )
    assert answer.status_code == 200, answer.text
    items = answer.json()["items"]
    for item in items:  # the status view's contract, unchanged
        assert AttemptOut.model_validate(item).status == "queued"
    return [item["attempt_id"] for item in items]


@pytest.mark.usefixtures("directory")
def test_a_queued_attempt_past_the_threshold_is_listed_shown_and_counted(
    client: TestClient,
    browser: TestClient,
    bearer: Callable[..., Headers],
    ledger: Ledger,
    settings: Settings,
) -> None:
    token = propose_and_present(client, bearer)
    approved = client.post(f"{API}/approvals", json={"token": token}, headers=bearer("channel"))
    attempt_id = approved.json()["attempt_id"]
    ledger.projector.project_attempt(attempt_id)  # what the running projector does
    admin = bearer("admin")
    clock = ledger.clock
    assert isinstance(clock, FixedClock)

    assert waiting(client, admin) == []  # queued, but not for long
    assert gauge(client, bearer) == 0
    admin_session(browser, settings)
    page = browser.get(f"/console/attempts/{attempt_id}").text
    assert "Queued: the next worker hosting its build takes it" in page
    assert "waiting_for_build" not in page

    clock.advance(settings.waiting_for_build_seconds + 1)  # no worker took it
    assert waiting(client, admin) == [attempt_id]
    assert gauge(client, bearer) == 1
    page = browser.get("/console").text
    section = page[page.index('id="waiting_for_build"') :]
    assert attempt_id[:20] in section and "waiting_for_build" in section
    # this process hosts the build: the guidance says its worker is off or busy
    page = browser.get(f"/console/attempts/{attempt_id}").text
    build = fake_build_digest("fake.provider_idempotency")
    assert f"no worker hosting fake.provider_idempotency build {build} has taken it" in page
    assert "This server hosts that build, so its own worker is off" in page
    assert "(hosted here)" in page and "waiting_for_build</span>" in page

    assert run_worker(ledger, attempt_id) == "succeeded"  # a worker with its build
    assert waiting(client, admin) == []
    assert gauge(client, bearer) == 0
    for role in ("actor", "channel", "proposer"):
        answer = client.get(
            f"{API}/execution-attempts",
            params={"status": "waiting_for_build"},
            headers=bearer(role),
        )
        assert answer.status_code == 403
