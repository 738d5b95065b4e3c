"""The console's webhook deliveries: admins only, failing first, and a redeliver
button that needs the session's CSRF token."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.settings import Settings
from projections.webhooks import DELIVERY_VIEW
from tests.support.console import admin_session, hidden_fields
from tests.support.http_helpers import Headers
from tests.support.webhooks import seed


def test_the_webhook_page_needs_an_admin_session(
    browser: TestClient,
    bearer: Callable[..., Headers],
    ledger: Ledger,
) -> None:
    (first, *_) = seed(ledger)
    for role in ("actor", "channel", "proposer", "metrics", "admin"):
        answer = browser.get("/console/webhooks", headers=bearer(role), follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/console/signin"
    forged = browser.post(f"/console/webhooks/{first}/redeliver", follow_redirects=False)
    assert forged.status_code == 303


def test_redeliver_a_failing_delivery_from_the_console(
    browser: TestClient,
    settings: Settings,
    ledger: Ledger,
) -> None:
    ids = seed(ledger, failing=3, delivered=1)
    admin_session(browser, settings)
    page = browser.get("/console/webhooks")
    assert page.status_code == 200
    assert 'href="/console/webhooks" aria-current="page"' in page.text
    assert all(i in page.text for i in ids[:3]) and ids[3] not in page.text
    assert "http_status (500)" in page.text and "CANARY" not in page.text
    form = f"redeliver-{ids[1]}"
    fields = hidden_fields(page.text, form)
    url = f"/console/webhooks/{ids[1]}/redeliver"

    forged = browser.post(url, data={"csrf": "x" * 43})
    assert forged.status_code == 403 and "security token did not match" in forged.text
    assert ledger.views is not None
    stored = ledger.views.get_view(DELIVERY_VIEW, ids[1])
    assert stored is not None and stored.data["status"] == "failing"

    done = browser.post(url, data=fields, follow_redirects=False)
    assert done.status_code == 303
    shown = browser.get(done.headers["location"])
    assert "The delivery is pending again" in shown.text and ids[1] in shown.text
    stored = ledger.views.get_view(DELIVERY_VIEW, ids[1])
    assert stored is not None and stored.data["status"] == "pending"

    missing = browser.post(f"/console/webhooks/whd_{'0' * 32}/redeliver", data=fields)
    assert missing.status_code == 404 and "no such delivery" in missing.text
    delivered = browser.get("/console/webhooks", params={"status": "delivered"})
    assert ids[3] in delivered.text
    bad = browser.get("/console/webhooks", params={"status": "lost"})
    assert bad.status_code in (400, 422)


def test_redeliver_a_page_of_failing_deliveries_at_once(
    browser: TestClient, settings: Settings, ledger: Ledger
) -> None:
    ids = seed(ledger, failing=3, delivered=1)
    admin_session(browser, settings)
    page = browser.get("/console/webhooks").text
    assert "Redeliver all 3 on this page" in page
    csrf = hidden_fields(page, "redeliver-page")["csrf"]
    url = "/console/webhooks/redeliver"
    assert browser.post(url, data={"csrf": "x" * 43, "delivery_id": ids[:3]}).status_code == 403
    unknown = browser.post(url, data={"csrf": csrf, "delivery_id": [ids[0], f"whd_{'0' * 32}"]})
    assert unknown.status_code == 404 and "Nothing was sent again" in unknown.text
    statuses = {i: ledger.views.get_view(DELIVERY_VIEW, i).data["status"] for i in ids[:3]}  # type: ignore[union-attr]
    assert set(statuses.values()) == {"failing"}  # one unknown id sends none
    done = browser.post(url, data={"csrf": csrf, "delivery_id": ids[:3]}, follow_redirects=False)
    assert done.status_code == 303
    shown = browser.get(done.headers["location"]).text
    assert "The page&#39;s deliveries are pending again" in shown
    for delivery_id in ids[:3]:
        stored = ledger.views.get_view(DELIVERY_VIEW, delivery_id)
        assert stored is not None and stored.data["status"] == "pending"
    assert "Redeliver all" not in browser.get("/console/webhooks").text  # none failing now
