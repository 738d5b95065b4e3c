"""The console in a real headless Chromium (Debian's package), driven by Playwright.

No browser is downloaded: Playwright launches ``/usr/bin/chromium`` (CI installs
it, see .ci/run). A real ``ledger serve`` runs the worker, which leaves two
attempts in ``outcome_unknown``: once on a temporary SQLite store and once on
a DynamoDB table of the emulator (one server per store for the package). As an admin:
sign in, find the attempt in the attention list, open it, resolve it and see it
leave the list; a form gone stale shows the conflict in words; and a non-admin
reaches no console page. ``LEDGER_CONSOLE_SCREENSHOTS=docs`` writes the README's
screenshots (from the SQLite run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import (
    WIDTHS,
    Served,
    api,
    require_chromium,
    sign_in,
    until_listed,
)

require_chromium()

ROOT = Path(__file__).resolve().parents[2]


def _shot(page: Any, name: str, served: Served) -> None:
    target = os.environ.get("LEDGER_CONSOLE_SCREENSHOTS")
    if target and served.store == "sqlite":  # one set of pictures, the same pages
        if name.startswith("attention"):  # every entry of the list drawn, the derived one too
            until_listed(page, f"#waiting_for_build a[href$='{served.waiting}']", 60)
        page.screenshot(path=str(ROOT / target / f"console-{name}.png"), full_page=True)


def test_an_admin_resolves_an_unknown_attempt_and_it_leaves_the_list(
    served: Served, page: Any
) -> None:
    first = served.unknown[0]
    sign_in(page, served.base, served.admin)
    assert page.url == f"{served.base}/console"
    listed = page.locator("#outcome_unknown a[href^='/console/attempts/']")
    before = listed.count()
    assert before >= 1 and page.locator(f"a[href='/console/attempts/{first}']").count() == 1
    _shot(page, "attention", served)

    page.click(f"a[href='/console/attempts/{first}']")
    assert page.url == f"{served.base}/console/attempts/{first}"
    assert page.locator("svg.timeline circle").count() >= 4
    assert page.locator("text=hash chains verified").count() == 1
    _shot(page, "attempt", served)
    page.check("input[name=resolution][value=effect_applied]")
    page.fill("#reason", "provider console shows the task")
    page.click("#resolve button[type=submit]")
    assert page.url == f"{served.base}/console/attempts/{first}?done=resolved"
    assert page.locator(".state.manually_resolved").count() >= 1

    page.click("nav a[href='/console']")
    remaining = page.locator("#outcome_unknown a[href^='/console/attempts/']")
    assert remaining.count() == before - 1
    assert page.locator(f"a[href='/console/attempts/{first}']").count() == 0

    page.click("nav a[href='/console/attempts']")
    page.click("a[href='/console/attempts?status=manually_resolved']")
    # a click waits for the navigation to commit only: count on the whole page
    page.wait_for_load_state("load")
    assert page.locator(f"a[href='/console/attempts/{first}']").count() == 1
    _shot(page, "attempts", served)


def test_a_stale_form_shows_the_conflict(served: Served, page: Any) -> None:
    second = served.unknown[1]
    sign_in(page, served.base, served.admin)
    page.goto(f"{served.base}/console/attempts/{second}")
    page.fill("#reason", "provider console shows nothing")
    page.check("input[name=resolution][value=no_effect]")
    # another admin settles it first, through the API
    revision = int(page.locator("#resolve input[name=expected_revision]").input_value())
    other = httpx.post(
        f"{api(served.base)}/execution-attempts/{second}/resolve",
        headers={"Authorization": f"Bearer {served.admin}"},
        json={
            "expected_revision": revision,
            "resolution": "effect_applied",
            "reason": "seen by the on-call admin",
        },
    )
    assert other.status_code == 200, other.text
    page.click("#resolve button[type=submit]")
    problem = page.locator(".problem")
    assert problem.count() == 1
    text = problem.inner_text()
    assert "Conflict (409), nothing was changed" in text
    assert f"The form was for revision {revision}" in text and "manually_resolved" in text


def test_a_member_reaches_only_their_inbox_and_other_roles_nothing(
    served: Served, page: Any
) -> None:
    sign_in(page, served.base, served.proposer)
    assert page.locator(".problem").inner_text() == "This token cannot open the console."
    assert not [c for c in page.context.cookies() if c["name"] == "ledger_console"]
    page.goto(f"{served.base}/console")
    assert page.url == f"{served.base}/console/signin"
    page.fill("#token", served.actor)  # alice, an enabled actor of the directory
    page.click("button[type=submit]")
    assert page.url == f"{served.base}/console/inbox"
    assert page.locator("h1").inner_text() == "Your approvals"
    for path in (
        "/console",
        "/console/attempts",
        f"/console/attempts/{served.unknown[0]}",
        "/console/webhooks",
    ):
        page.goto(f"{served.base}{path}")
        assert page.url == f"{served.base}/console/inbox", path
    assert page.locator("nav a").all_inner_texts() == ["Your approvals"]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_the_screen(served: Served, page: Any, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, served.base, served.admin)
    for path, name in (
        ("/console", "attention"),
        ("/console/attempts", "find"),
        (f"/console/attempts/{served.unknown[0]}", "attempt"),
        ("/console/inbox?actor_id=alice&status=claimed", "inbox"),
        ("/console/webhooks", "webhooks"),
    ):
        page.goto(f"{served.base}{path}")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, (path, width, overflow)
        if width == 390 and path.startswith("/console/attempts/"):
            # tables collapse into cards: a cell shows its column's name
            label = page.locator("table.cards td[data-label='Event']").first
            assert label.is_visible()
            assert page.locator("table.cards thead").first.is_hidden()
        _shot(page, f"{name}-{width}", served)
