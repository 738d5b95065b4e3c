"""Secrets and sessions (issue 26, finding 4).

- A webhook secret with fewer than 24 bytes of key (``whsec_``, ``whsec_AAAA``,
  ``x``...) is refused by ``ledger executors check`` and ``ledger serve`` in one
  line naming the file and the key. Before: accepted (``whsec_`` is an empty
  HMAC key, so anyone could sign).
- Signing out of the console ends the session on the server: a copy of its
  cookie opens no page and runs no CSRF-protected action afterwards, on every
  store. Before: sign-out only deleted the browser's cookie.
- Each session has its own CSRF token.
- ``Secure`` comes from the settings, never from the request's ``Host``; every
  console cookie, the sign-out's included, is SameSite=Strict.
- No page reflects the ``done=`` text of its query.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import Settings, load_settings
from adapters.store import LedgerStore
from api.console.session import KEY_PREFIX
from api.http.app import create_app
from api.http.auth import mint_token
from tests.support.cli import assert_one_line_failure, invoke
from tests.support.clocks import FixedClock
from tests.support.console import admin_session, hidden_fields
from tests.support.webhooks import seed

pytestmark = pytest.mark.usefixtures("hermetic_env")


def whsec(key: bytes) -> str:
    return "whsec_" + base64.b64encode(key).decode()


HOOK = (
    '[[webhook]]\nid = "chat"\nurl = "https://chat.example/hooks"\n'
    'secret = "env:HOOK_SECRET"\nevents = ["attempt.succeeded"]\n'
)
WEAK = {
    "empty key": "whsec_",
    "three bytes": "whsec_AAAA",
    "one plain byte": "x",
    "23 bytes": whsec(b"k" * 23),
    "23 plain bytes": "p" * 23,
}


@pytest.mark.parametrize("command", ["executors check", "serve"])
@pytest.mark.parametrize("secret", list(WEAK.values()), ids=list(WEAK))
def test_a_short_webhook_secret_is_refused_in_one_line_naming_the_file_and_key(
    tmp_path: Path, command: str, secret: str
) -> None:
    path = tmp_path / "hooks.toml"
    path.write_text(HOOK)
    with socket.socket() as taken:  # a serve that got past the check fails at once here
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = ["executors", "check", "--file-only"] if command != "serve" else ["serve"]
        result = invoke(
            [*args, *(["--port", port] if command == "serve" else [])],
            LEDGER_STORE="memory",
            LEDGER_EXECUTORS_FILE=str(path),
            HOOK_SECRET=secret,
        )
    assert_one_line_failure(
        result, "hooks.toml", "[[webhook]] #1 (chat): secret (from HOOK_SECRET)", "at least 24"
    )
    if len(secret) > 8:
        assert secret not in result.stderr


@pytest.mark.parametrize("secret", [whsec(b"k" * 24), "p" * 24, whsec(b"k" * 64)])
def test_a_secret_of_24_bytes_or_more_is_accepted(tmp_path: Path, secret: str) -> None:
    path = tmp_path / "hooks.toml"
    path.write_text(HOOK)
    result = invoke(
        ["executors", "check", "--file-only"],
        LEDGER_STORE="memory",
        LEDGER_EXECUTORS_FILE=str(path),
        HOOK_SECRET=secret,
    )
    assert result.exit_code == 0, result.stderr


# -- sessions in the store -------------------------------------------------------------


@pytest.fixture
def console_on(store: LedgerStore) -> Iterator[tuple[Settings, Ledger, Any]]:
    """The console's app over the test's store (memory, SQLite, the emulator)."""
    settings = load_settings(store="memory", env="test")
    ledger = build_ledger(settings, recorder=store.recorder, clock=FixedClock())
    clients: list[TestClient] = []

    def browser() -> TestClient:
        client = TestClient(create_app(settings, ledger=ledger), base_url="http://127.0.0.1")
        clients.append(client.__enter__())
        return client

    yield settings, ledger, browser
    for client in clients:
        client.__exit__(None, None, None)
    ledger.registry.close()


def test_sign_out_ends_the_session_wherever_its_cookie_was_copied(
    console_on: tuple[Settings, Ledger, Any],
) -> None:
    settings, ledger, browser = console_on
    (first, *_) = seed(ledger)
    mine, thief = browser(), browser()
    admin_session(mine, settings)
    cookie = mine.cookies["ledger_console"]
    thief.cookies.set("ledger_console", cookie, domain="127.0.0.1", path="/console")
    page = thief.get("/console/webhooks")
    assert page.status_code == 200  # the copy works while the session lives
    fields = hidden_fields(page.text, f"redeliver-{first}")

    signed_out = mine.post(
        "/console/signout", data={"csrf": fields["csrf"]}, follow_redirects=False
    )
    assert signed_out.status_code == 303

    for path in ("/console", "/console/webhooks", "/console/attempts"):
        answer = thief.get(path, follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/console/signin"
    action = thief.post(f"/console/webhooks/{first}/redeliver", data=fields, follow_redirects=False)
    assert action.status_code == 303 and action.headers["location"] == "/console/signin"
    assert ledger.views is not None
    stored = ledger.views.get_view("webhook_delivery", first)
    assert stored is not None and stored.data["status"] == "failing"  # nothing was run
    # only the hash of the session id was ever stored, and it is gone now
    assert ledger.store.get_lookup(KEY_PREFIX + "0" * 64) is None


def test_each_session_has_its_own_csrf_token(console_on: tuple[Settings, Ledger, Any]) -> None:
    settings, ledger, browser = console_on
    (first, *_) = seed(ledger)
    one, two = browser(), browser()
    admin_session(one, settings)
    admin_session(two, settings)
    csrf_one = hidden_fields(one.get("/console/webhooks").text, f"redeliver-{first}")["csrf"]
    csrf_two = hidden_fields(two.get("/console/webhooks").text, f"redeliver-{first}")["csrf"]
    assert csrf_one != csrf_two
    forged = two.post(f"/console/webhooks/{first}/redeliver", data={"csrf": csrf_one})
    assert forged.status_code == 403 and "security token did not match" in forged.text


def test_an_expired_session_item_opens_nothing(console_on: tuple[Settings, Ledger, Any]) -> None:
    settings, ledger, browser = console_on
    clock = FixedClock()
    ledger.clock = clock
    client = browser()
    admin_session(client, settings)
    assert client.get("/console").status_code == 200
    clock.advance(settings.console_session_seconds)
    assert client.get("/console", follow_redirects=False).status_code == 303


# -- cookie flags from the settings ------------------------------------------------------


def cookies_of(response: Any) -> dict[str, tuple[str, dict[str, str]]]:
    """name -> (value, flags) of every cookie a response sets."""
    found: dict[str, tuple[str, dict[str, str]]] = {}
    for header in response.headers.get_list("set-cookie"):
        first, *rest = header.split(";")
        name, _, value = first.partition("=")
        flags = {part.strip().split("=")[0].lower(): part.strip() for part in rest}
        found[name.strip()] = (value.strip().strip('"'), flags)
    return found


def console_cookies(settings: Settings, base_url: str) -> list[dict[str, str]]:
    """Every cookie the console sets on one sign-in and sign-out at ``base_url``.

    The cookies are sent back by hand, as a browser talking https to a proxy in
    front of the app would (the client's jar keeps Secure cookies off http)."""
    ledger = build_ledger(settings, clock=FixedClock())
    seen: list[dict[str, str]] = []
    with TestClient(create_app(settings, ledger=ledger), base_url=base_url) as client:
        form = client.get("/console/signin")
        nonce, flags = cookies_of(form)["ledger_console_signin"]
        seen.append(flags)
        client.cookies.clear()
        token = mint_token(settings, subject="ops", role="admin")
        answer = client.post(
            "/console/signin",
            data={"token": token, **hidden_fields(form.text)},
            headers={"Cookie": f"ledger_console_signin={nonce}"},
            follow_redirects=False,
        )
        assert answer.status_code == 303, answer.text
        set_now = cookies_of(answer)
        seen += [flags for _, flags in set_now.values()]
        session = {"Cookie": f"ledger_console={set_now['ledger_console'][0]}"}
        client.cookies.clear()
        page = client.get("/console", headers=session)
        assert page.status_code == 200
        out = client.post(
            "/console/signout",
            data=hidden_fields(page.text),
            headers=session,
            follow_redirects=False,
        )
        assert out.status_code == 303
        seen += [flags for _, flags in cookies_of(out).values()]
    ledger.close()
    return seen


@pytest.mark.parametrize(
    ("settings", "base_url", "secure"),
    [
        ({}, "https://ledger.example", False),  # development: from the settings, not the URL
        ({"env": "production", "auth_hs256_secret": "s" * 40}, "http://127.0.0.1", True),
        ({"public_url": "https://ledger.example"}, "http://127.0.0.1", True),
        ({"public_url": "http://127.0.0.1:8000"}, "https://ledger.example", False),
        ({"console_secure_cookies": True}, "http://127.0.0.1", True),
        (
            {"console_secure_cookies": False, "public_url": "https://ledger.example"},
            "https://ledger.example",
            False,
        ),
    ],
)
def test_the_secure_flag_comes_from_the_settings_never_from_the_host(
    settings: dict[str, Any], base_url: str, secure: bool
) -> None:
    every = console_cookies(load_settings(store="memory", **{"env": "test", **settings}), base_url)
    assert len(every) >= 4  # the form's nonce, the session, the nonce cleared, the sign-out
    for flags in every:
        assert ("secure" in flags) is secure, flags
        assert flags["samesite"].lower() == "samesite=strict", flags
        assert "httponly" in flags, flags


def test_a_public_url_must_be_http_or_https() -> None:
    from adapters.settings import SettingsError

    with pytest.raises(SettingsError, match="LEDGER_PUBLIC_URL"):
        load_settings(public_url="ftp://ledger.example")


# -- no reflected free text ----------------------------------------------------------------


def test_the_done_query_is_never_reflected(
    browser: TestClient, settings: Settings, ledger: Ledger
) -> None:
    (first, *_) = seed(ledger)
    admin_session(browser, settings)
    marker = "INJECTED-TEXT-7f3a"
    for path in ("/console/webhooks", "/console/attempts/att_missing"):
        page = browser.get(path, params={"done": marker})
        assert marker not in page.text, path
    page = browser.get("/console/webhooks", params={"done": "redelivered"})
    assert "The delivery is pending again" in page.text
    fields = hidden_fields(page.text, f"redeliver-{first}")
    done = browser.post(f"/console/webhooks/{first}/redeliver", data=fields, follow_redirects=False)
    assert done.headers["location"].endswith("done=redelivered")
