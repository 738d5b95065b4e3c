"""The on-call console in a real headless Chromium, at 1280 and 390 pixels wide,
on each served store (tests.support.browser): what the attempt was and the
recorded Reveal of its preview, acknowledging a failed_safe so it leaves the
attention list, resolving an effect found after "no effect" from its form,
finding attempts by status and id prefix (newest first), redelivering a
page of failing webhooks at once, and an attempt waiting for a build the
server does not host, with the guidance that names the build. At 390 every
control used is on the screen and clicked there."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from adapters.bootstrap import Ledger
from domain.attempt import ExecutionAttempt
from domain.oversight import reveals_id
from domain.ports import Commit
from tests.support.browser import (
    TITLE,
    UNHOSTED,
    WAITING_SECONDS,
    WIDTHS,
    Served,
    api,
    make_attempt,
    reachable,
    require_chromium,
    settled,
    sign_in,
    until_listed,
)
from tests.support.http_helpers import PROVENANCE

require_chromium()

pytestmark = pytest.mark.parametrize("width", WIDTHS)


def _open(page: Any, served: Served, width: int, path: str) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, served.base, served.admin)
    page.goto(f"{served.base}{path}")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, (path, width, overflow)


def _reveals(ledger: Ledger, attempt_id: str) -> list[dict[str, Any]]:
    events, bad = ledger.store.audit_events(reveals_id(attempt_id))
    assert bad is None
    return [e.data() for e in events if type(e).__name__ == "PreviewRevealed"]


def test_the_attempt_page_says_what_it_was_and_reveal_is_recorded(
    served: Served, page: Any, width: int, ledger_of: Callable[[Served], Ledger]
) -> None:
    attempt_id = served.what
    _open(page, served, width, "/console")
    row = page.locator("#outcome_unknown tr", has=page.locator(f"a[href$='{attempt_id}']"))
    assert "fake.operator_only" in row.inner_text() and PROVENANCE.actor_id in row.inner_text()
    reachable(page, f"#outcome_unknown a[href='/console/attempts/{attempt_id}']", width)
    assert page.url == f"{served.base}/console/attempts/{attempt_id}"
    what = page.locator("#what").inner_text()
    for shown in (
        "fake.operator_only",
        "tasks",
        "task:42 at base revision r7",
        "assistant-backend",
        f"{PROVENANCE.actor_id} via {PROVENANCE.identity_binding_id}",
        PROVENANCE.channel_binding_id,
        "operator_reconciliation_only",
    ):
        assert shown in what, shown
    key = page.locator("#idempotency-key").inner_text()
    assert key and "redacted" not in key  # to admins, the key to search the provider for
    assert f"search the provider for key {key}" in page.locator("#guidance").inner_text()
    assert page.locator("#resolve input[name=resolution]:checked").count() == 0
    assert TITLE not in page.content()  # content only behind Reveal

    ledger = ledger_of(served)
    before = len(_reveals(ledger, attempt_id))
    reachable(page, "#reveal button[type=submit]", width)
    assert TITLE in page.locator("#preview-text").inner_text()
    assert "Revealed by ops at" in page.locator("#reveals").inner_text()
    revealed = _reveals(ledger, attempt_id)  # recorded before the page showed it
    assert len(revealed) == before + 1
    assert (revealed[-1]["by"], revealed[-1]["attempt_id"]) == ("ops", attempt_id)
    page.goto(f"{served.base}/console/attempts/{attempt_id}")
    assert TITLE not in page.content()  # reloaded, it is hidden again


def test_a_succeeded_attempt_shows_its_receipt_as_json(
    served: Served, page: Any, width: int
) -> None:
    _open(page, served, width, f"/console/attempts/{served.succeeded}")
    receipt = json.loads(page.locator("#receipt").inner_text())
    assert isinstance(receipt, dict) and receipt
    assert page.locator("#receipt").is_visible()
    assert page.locator("#resolve, #acknowledge").count() == 0  # nothing to do


def test_a_failed_safe_is_acknowledged_from_the_page_and_leaves_the_list(
    served: Served, page: Any, width: int
) -> None:
    attempt_id = served.failed[width]
    link = f"#failed_safe a[href='/console/attempts/{attempt_id}']"
    _open(page, served, width, "/console")
    reachable(page, link, width)
    assert "acknowledge it so it leaves the list" in page.locator("#guidance").inner_text()
    page.fill("#note", f"told the team at {width}")
    reachable(page, "#acknowledge button[type=submit]", width)
    assert "Acknowledged: it left the attention list." in page.locator(".notice").inner_text()
    assert f"told the team at {width}" in page.locator("#what").inner_text()
    assert page.locator("#acknowledge").count() == 0
    reachable(page, "nav a[href='/console']", width)
    assert page.locator(link).count() == 0
    assert page.locator(f"#failed_safe a[href$='{served.older_failed}']").count() == 1


def test_an_effect_after_no_effect_is_resolved_from_its_form(
    served: Served, page: Any, width: int, ledger_of: Callable[[Served], Ledger]
) -> None:
    # A failed_safe attempt of its own, whose late result then says the effect
    # happened: the worst state the ledger reports, written as the worker would.
    tokens = {
        role: {"Authorization": f"Bearer {token}"}
        for role, token in (
            ("admin", served.admin),
            ("proposer", served.proposer),
            ("channel", served.channel),
        )
    }
    with httpx.Client(timeout=10) as http:
        made = make_attempt(
            http, served.base, tokens, "fake.provider_idempotency", "no_write_error"
        )
        attempt_id = settled(http, served.base, tokens, made, "failed_safe")
    ledger = ledger_of(served)
    attempt = ledger.store.get(ExecutionAttempt, attempt_id)
    assert attempt is not None
    attempt.observe_late_result(
        generation=attempt.lease_generation, kind="succeeded", now=ledger.clock.now()
    )
    ledger.store.commit(Commit(aggregates=[attempt]))
    ledger.projector.project_attempt(attempt_id)

    link = f"#effect_after_no_effect a[href='/console/attempts/{attempt_id}']"
    _open(page, served, width, "/console")
    assert page.locator(f"#failed_safe a[href='/console/attempts/{attempt_id}']").count() == 0
    reachable(page, link, width)
    assert "The effect was found after the attempt" in page.locator("#guidance").inner_text()
    assert page.locator("input[name=resolution]:checked").count() == 0  # nothing preselected
    page.check("input[name=resolution][value=effect_applied]")
    page.fill("#reason", f"the provider kept it ({width})")
    reachable(page, "#resolve button[type=submit]", width)
    assert page.url.endswith(f"/console/attempts/{attempt_id}?done=resolved")
    assert page.locator(".state.manually_resolved").count() >= 1
    reachable(page, "nav a[href='/console']", width)
    assert page.locator(link).count() == 0


def test_find_attempts_by_status_and_id_prefix(served: Served, page: Any, width: int) -> None:
    _open(page, served, width, "/console/attempts")
    page.select_option("#find select[name=status]", "failed_safe")
    reachable(page, "#find button[type=submit]", width)
    listed = page.locator("table.cards a[href^='/console/attempts/']")
    hrefs = [h.rsplit("/", 1)[1] for h in listed.evaluate_all("as => as.map(a => a.href)")]
    failed = [served.older_failed, served.failed[WIDTHS[0]], served.failed[WIDTHS[1]]]
    assert hrefs == failed[::-1]  # every failed_safe attempt, newest first, nothing else
    assert "failed_safe" in page.url

    wanted = served.failed[width]
    page.fill("#find input[name=id]", wanted[:12])
    reachable(page, "#find button[type=submit]", width)
    hrefs = [h.rsplit("/", 1)[1] for h in listed.evaluate_all("as => as.map(a => a.href)")]
    assert hrefs == [wanted]


def _tries(served: Served) -> dict[str, int]:
    tries: dict[str, int] = {}
    for status in ("failing", "pending"):
        answer = httpx.get(
            f"{api(served.base)}/webhook-deliveries",
            params={"status": status, "limit": 100},
            headers={"Authorization": f"Bearer {served.admin}"},
        )
        assert answer.status_code == 200, answer.text
        tries.update({d["delivery_id"]: int(d["attempts"]) for d in answer.json()["items"]})
    return tries


def test_redeliver_a_page_of_failing_webhooks_at_once(
    served: Served, page: Any, width: int
) -> None:
    _open(page, served, width, "/console/webhooks?status=failing")
    bulk = page.locator("#redeliver-page button[type=submit]")
    for _ in range(100):  # bounded: the deliverer's first tries against the closed port
        if bulk.count() == 1:
            break
        time.sleep(0.2)
        page.reload()
    ids = page.locator("#redeliver-page input[name=delivery_id]").evaluate_all(
        "inputs => inputs.map(i => i.value)"
    )
    assert ids and bulk.inner_text() == f"Redeliver all {len(ids)} on this page"
    before = _tries(served)
    reachable(page, "#redeliver-page button[type=submit]", width)
    assert "deliveries are pending again" in page.locator(".notice").inner_text()
    for _ in range(150):  # each one is sent again (and fails again) on the next pass
        now = _tries(served)
        if all(now.get(i, 0) > before[i] for i in ids):
            break
        time.sleep(0.2)
    assert all(now.get(i, 0) > before[i] for i in ids), (before, now)


def test_an_attempt_waiting_for_its_build_names_the_build_and_what_to_do(
    served: Served, page: Any, width: int
) -> None:
    admin = {"Authorization": f"Bearer {served.admin}"}
    hosted = httpx.get(f"{api(served.base)}/executors", headers=admin)
    assert hosted.status_code == 200, hosted.text
    builds = {item["executor_build"] for item in hosted.json()["items"]}
    assert builds and served.waiting_build not in builds  # the server's worker lacks it

    anchor = f"a[href='/console/attempts/{served.waiting}']"
    link = f"#waiting_for_build {anchor}"
    _open(page, served, width, "/console")
    until_listed(page, link, 3 * WAITING_SECONDS)  # the threshold passes once for the package
    row = page.locator("#waiting_for_build tr", has=page.locator(anchor)).inner_text()
    for shown in (
        "queued",
        "waiting_for_build",
        UNHOSTED,
        "tasks",
        "task:42",
        PROVENANCE.actor_id,
        PROVENANCE.channel_binding_id,
        "provider_idempotency",
    ):
        assert shown in row, (shown, row)

    reachable(page, link, width)
    assert page.url == f"{served.base}/console/attempts/{served.waiting}"
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, (width, overflow)  # the long digests wrap
    guidance = page.locator("#guidance").inner_text()
    assert f"no worker hosting {UNHOSTED} build {served.waiting_build} has taken it" in guidance
    assert f"LEDGER_WAITING_FOR_BUILD_SECONDS ({WAITING_SECONDS} s)" in guidance
    assert "This server does not host that build" in guidance
    assert "Start a worker whose executors file lists this build" in guidance
    assert f"PUT /directory/executor-builds/{UNHOSTED}/{served.waiting_build}" in guidance
    assert "failed_safe, since it was never dispatched" in guidance
    what = page.locator("#what").inner_text()
    assert "waiting_for_build" in what and "(not hosted here)" in what
    assert page.locator("#build").inner_text() == served.waiting_build
    assert page.locator("#resolve, #acknowledge").count() == 0  # nothing to settle by hand
    status = httpx.get(
        f"{api(served.base)}/execution-attempts/{served.waiting}", headers=admin
    ).json()
    assert status["status"] == "queued"  # still untaken: no worker hosts its build
