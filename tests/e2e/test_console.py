"""The console: admins only, sessions and CSRF, the attention list, resolve with revisions,
the pending-approval inbox."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.executors.fake import fake_build_digest
from adapters.settings import Settings
from api.http.app import create_app
from api.http.auth import mint_token
from tests.support.console import admin_session, hidden_fields, sign_in
from tests.support.http_helpers import API, PROVENANCE, Headers, propose_and_present, run_worker

PAGES = [
    "/console",
    "/console/attempts",
    "/console/attempts?status=failed_safe",
    "/console/attempts/att_missing",
    "/console/inbox",
    "/console/inbox?actor_id=alice&status=claimed",
]


def unknown_attempt(client: TestClient, bearer: Callable[..., Headers], ledger: Ledger) -> str:
    token = propose_and_present(
        client,
        bearer,
        capability="fake.operator_only",
        executor_build=fake_build_digest("fake.operator_only"),
        content={"simulate": "timeout_after_effect"},
    )
    attempt_id: str = client.post(
        f"{API}/approvals", json={"token": token}, headers=bearer("channel")
    ).json()["attempt_id"]
    assert run_worker(ledger, attempt_id) == "outcome_unknown"
    return attempt_id


def test_no_console_page_opens_without_an_admin_session(
    browser: TestClient, settings: Settings, bearer: Callable[..., Headers]
) -> None:
    for role in ("actor", "channel", "proposer", "metrics", "admin"):
        for page in PAGES:  # a bearer header is not a session
            answer = browser.get(page, headers=bearer(role), follow_redirects=False)
            assert answer.status_code == 303, (role, page)
            assert answer.headers["location"] == "/console/signin"
    for path in (
        "/console/attempts/att_x/resolve",
        "/console/attempts/att_x/reconcile",
        "/console/signout",
    ):
        assert browser.post(path, follow_redirects=False).status_code == 303


@pytest.mark.parametrize("role", ["actor", "channel", "proposer", "metrics", None])
def test_only_an_admin_token_signs_in(
    browser: TestClient, settings: Settings, bearer: Callable[..., Headers], role: str | None
) -> None:
    token = "not-a-token" if role is None else bearer(role)["Authorization"].split()[1]
    answer = sign_in(browser, token)
    assert answer.status_code == 401
    assert "This token cannot open the console." in answer.text
    assert "ledger_console=" not in answer.headers.get("set-cookie", "")
    assert token not in answer.text
    for page in PAGES:
        assert browser.get(page, follow_redirects=False).status_code == 303


def test_the_session_cookie_is_httponly_strict_and_short_lived(
    browser: TestClient, settings: Settings
) -> None:
    token = mint_token(settings, subject="ops", role="admin")
    answer = sign_in(browser, token)
    cookie = next(
        c for c in answer.headers.get_list("set-cookie") if c.startswith("ledger_console=")
    )
    flags = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")}
    assert "httponly" in flags and flags["samesite"].lower() == "samesite=strict"
    assert int(flags["max-age"].split("=")[1]) <= settings.console_session_seconds
    assert token not in cookie
    assert browser.get("/console").status_code == 200


def test_sign_in_needs_the_forms_own_nonce(browser: TestClient, settings: Settings) -> None:
    token = mint_token(settings, subject="ops", role="admin")
    answer = browser.post(
        "/console/signin", data={"token": token, "csrf": "guessed"}, follow_redirects=False
    )
    assert answer.status_code == 400
    assert browser.get("/console", follow_redirects=False).status_code == 303


@pytest.mark.usefixtures("directory")
def test_resolve_from_the_attention_list_with_csrf_and_revision(
    browser: TestClient,
    client: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    attempt_id = unknown_attempt(client, bearer, ledger)
    admin_session(browser, settings)
    listed = browser.get("/console")
    assert f"/console/attempts/{attempt_id}" in listed.text
    page = browser.get(f"/console/attempts/{attempt_id}")
    assert page.status_code == 200 and "<svg" in page.text and "hash chains verified" in page.text
    fields = hidden_fields(page.text, "resolve")
    url = f"/console/attempts/{attempt_id}/resolve"
    forged = browser.post(
        url, data={**fields, "csrf": "x" * 43, "resolution": "no_effect", "reason": "checked"}
    )
    assert forged.status_code == 403 and "security token did not match" in forged.text
    stale = browser.post(
        url,
        data={
            **fields,
            "expected_revision": str(int(fields["expected_revision"]) - 1),
            "resolution": "no_effect",
            "reason": "checked",
        },
    )
    assert stale.status_code == 409
    assert "Conflict (409), nothing was changed" in stale.text
    assert f"revision {fields['expected_revision']}, status outcome_unknown" in stale.text
    done = browser.post(
        url,
        data={
            **fields,
            "resolution": "effect_applied",
            "reason": "provider console shows the task",
        },
        follow_redirects=False,
    )
    assert done.status_code == 303
    resolved = browser.get(done.headers["location"])
    assert "manually_resolved" in resolved.text and "Resolved." in resolved.text
    assert f"/console/attempts/{attempt_id}" not in browser.get("/console").text
    # the same stale form again, with the other verdict: the conflict in words
    again = browser.post(url, data={**fields, "resolution": "no_effect", "reason": "checked"})
    assert again.status_code == 409 and "status manually_resolved" in again.text


def test_an_expired_session_sends_back_to_sign_in(settings: Settings, ledger: Ledger) -> None:
    from tests.support.clocks import FixedClock

    clock = FixedClock()
    ledger.clock = clock
    with TestClient(create_app(settings, ledger=ledger), base_url="http://127.0.0.1") as c:
        admin_session(c, settings)
        assert c.get("/console").status_code == 200
        clock.advance(settings.console_session_seconds + 1)
        assert c.get("/console", follow_redirects=False).status_code == 303


@pytest.mark.usefixtures("directory")
def test_pending_approvals_lists_an_actors_inbox_paged_without_tokens(
    browser: TestClient,
    client: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from api.console import routes

    tokens = [propose_and_present(client, bearer) for _ in range(3)]
    admin_session(browser, settings)
    empty = browser.get("/console/inbox")
    assert empty.status_code == 200 and 'name="actor_id"' in empty.text
    assert 'href="/console/inbox" aria-current="page"' in empty.text
    assert 'href="/console/inbox"' in browser.get("/console").text
    monkeypatch.setattr(routes, "PAGE_SIZE", 2)
    first = browser.get("/console/inbox", params={"actor_id": PROVENANCE.actor_id})
    assert first.status_code == 200
    assert first.text.count('data-label="Proposal">prop_') == 2 and "Next page" in first.text
    more = first.text.split('<a href="/console/inbox?')[1].split('"')[0].replace("&amp;", "&")
    assert "status=presented" in more and "cursor=" in more
    second = browser.get(f"/console/inbox?{more}")
    assert second.status_code == 200
    assert second.text.count('data-label="Proposal">prop_') == 1 and "Next page" not in second.text
    for page in (first, second):
        assert not any(token in page.text for token in tokens)
    claimed = client.post(
        f"{API}/approvals", json={"token": tokens[0]}, headers=bearer("channel")
    ).json()["attempt_id"]
    shown = browser.get(
        "/console/inbox", params={"actor_id": PROVENANCE.actor_id, "status": "claimed"}
    )
    assert shown.text.count('data-label="Proposal">prop_') == 1
    assert f'href="/console/attempts/{claimed}"' in shown.text
    assert '<span class="kind">single</span>' in shown.text  # one person approved it
    nobody = browser.get("/console/inbox", params={"actor_id": "nobody"}).text
    assert nobody.count("None.") == 2  # neither proposals of theirs nor votes waiting
    bad = browser.get("/console/inbox", params={"actor_id": "<script>"})
    assert bad.status_code == 400 and "<script>" not in bad.text
