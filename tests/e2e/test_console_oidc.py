"""Console sign-in through OpenID Connect against a real provider on loopback
(Authlib's authorization server): the whole redirect dance, the admin claim,
a tampered state, a replayed code, and sign-out ending the session."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import Settings, SettingsError, load_settings
from api.console.oidc import REFUSED
from api.http.app import create_app
from tests.support.clocks import FixedClock
from tests.support.oidc_provider import OidcProvider

PUBLIC_URL = "http://127.0.0.1"
USERS = {
    "alice": {"name": "Alice", "groups": ["staff", "ledger-admins"]},
    "bob": {"name": "Bob", "groups": ["staff"]},
}


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    with OidcProvider(
        USERS, client_id="ledger-console", redirect_uri=PUBLIC_URL + "/console/oidc/callback"
    ) as provider:
        yield provider


@pytest.fixture
def settings(idp: OidcProvider) -> Settings:
    return load_settings(
        store="memory",
        env="test",
        public_url=PUBLIC_URL,
        console_oidc_issuer=idp.issuer,
        console_oidc_client_id=idp.client.client_id,
        console_oidc_client_secret=idp.client.client_secret,
        console_oidc_scope="openid profile groups",
    )


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def ledger(settings: Settings, clock: FixedClock) -> Iterator[Ledger]:
    wired = build_ledger(settings, clock=clock)
    yield wired
    wired.close()


@pytest.fixture
def browser(settings: Settings, ledger: Ledger) -> Iterator[TestClient]:
    with TestClient(create_app(settings, ledger=ledger), base_url=PUBLIC_URL) as client:
        yield client


def to_provider(browser: TestClient, user: str) -> str:
    """Start at the sign-in page's link, sign in at the provider as ``user``:
    the callback URL (with code and state) the provider redirects the browser to."""
    page = browser.get("/console/signin")
    assert 'href="/console/oidc/start"' in page.text
    start = browser.get("/console/oidc/start", follow_redirects=False)
    assert start.status_code == 303
    authorize = start.headers["location"]
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    with httpx.Client() as at_idp:
        assert at_idp.get(authorize).status_code == 200  # the provider's sign-in form
        back = at_idp.post(authorize, data={"username": user})
    assert back.status_code == 302, back.text
    callback = back.headers["location"]
    assert callback.startswith(PUBLIC_URL + "/console/oidc/callback?")
    return callback.removeprefix(PUBLIC_URL)


def session_cookie(answer: httpx.Response) -> str | None:
    for header in answer.headers.get_list("set-cookie"):
        found = re.match(r"ledger_console=([^;]+)", header)
        if found and found.group(1) != '""':
            return found.group(1)
    return None


def opens_console(browser: TestClient) -> bool:
    return browser.get("/console", follow_redirects=False).status_code == 200


def test_an_admin_signs_in_through_the_provider_and_sign_out_ends_it(
    browser: TestClient, ledger: Ledger, clock: FixedClock
) -> None:
    answer = browser.get(to_provider(browser, "alice"), follow_redirects=False)
    assert answer.status_code == 200, answer.text
    assert 'http-equiv="refresh" content="0; url=/console"' in answer.text
    cookie = session_cookie(answer)
    assert cookie is not None
    assert "SameSite=strict" in next(
        c for c in answer.headers.get_list("set-cookie") if c.startswith("ledger_console=")
    )
    console = browser.get("/console")
    assert console.status_code == 200 and "alice" in console.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', console.text)
    assert csrf is not None
    out = browser.post("/console/signout", data={"csrf": csrf.group(1)}, follow_redirects=False)
    assert out.status_code == 303
    browser.cookies.set("ledger_console", cookie, path="/console")  # a copy of the cookie
    assert not opens_console(browser)


def test_the_session_expires(browser: TestClient, settings: Settings, clock: FixedClock) -> None:
    assert browser.get(to_provider(browser, "alice")).status_code == 200
    assert opens_console(browser)
    clock.advance(settings.console_session_seconds)
    assert not opens_console(browser)


def test_a_user_without_the_admin_claim_is_refused(browser: TestClient) -> None:
    answer = browser.get(to_provider(browser, "bob"), follow_redirects=False)
    assert answer.status_code == 401 and REFUSED in answer.text
    assert session_cookie(answer) is None
    assert not opens_console(browser)


def test_a_tampered_state_is_refused_and_the_code_stays_unredeemed(
    browser: TestClient, idp: OidcProvider
) -> None:
    callback = to_provider(browser, "alice")
    state = parse_qs(urlsplit(callback).query)["state"][0]
    code = parse_qs(urlsplit(callback).query)["code"][0]
    tampered = callback.replace(state, ("0" if state[0] != "0" else "1") + state[1:])
    answer = browser.get(tampered, follow_redirects=False)
    assert answer.status_code == 401 and REFUSED in answer.text
    assert session_cookie(answer) is None and code not in idp.redeemed
    assert not opens_console(browser)
    overlong = browser.get(f"/console/oidc/callback?state={'a' * 5000}&code=x")
    assert overlong.status_code == 401 and REFUSED in overlong.text


def test_a_replayed_code_is_refused(browser: TestClient, idp: OidcProvider) -> None:
    first = to_provider(browser, "alice")
    assert browser.get(first).status_code == 200
    browser.cookies.clear()
    assert browser.get(first, follow_redirects=False).status_code == 401  # the same callback
    # the old code with a fresh sign-in's state: the provider refuses it (used, other verifier)
    fresh = to_provider(browser, "bob")
    old_code = parse_qs(urlsplit(first).query)["code"][0]
    new_code = parse_qs(urlsplit(fresh).query)["code"][0]
    answer = browser.get(fresh.replace(new_code, old_code), follow_redirects=False)
    assert answer.status_code == 401 and REFUSED in answer.text
    assert session_cookie(answer) is None
    assert not opens_console(browser)


def test_the_readme_configuration_loads_and_derives_the_redirect_url() -> None:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"<!-- console-oidc:start -->\s*```sh\n(.*?)```", text, re.S)
    assert block, "README console-oidc markers not found"
    script = block.group(1).replace('"$CLIENT_SECRET"', "s3cret")
    values = dict(re.findall(r"LEDGER_([A-Z_]+)=(\S+)", script))
    assert "ledger serve" in script and "CONSOLE_OIDC_ISSUER" in values
    loaded = load_settings(store="memory", **{k.lower(): v for k, v in values.items()})
    assert loaded.console_oidc_redirect_url == "https://ledger.example.com/console/oidc/callback"
    assert loaded.secure_cookies and "s3cret" not in repr(loaded)


def test_the_issuer_needs_a_client_id_and_the_public_url() -> None:
    with pytest.raises(SettingsError, match="LEDGER_CONSOLE_OIDC_CLIENT_ID"):
        load_settings(store="memory", console_oidc_issuer="https://idp.example.com")
    with pytest.raises(SettingsError, match="LEDGER_PUBLIC_URL"):
        load_settings(
            store="memory",
            console_oidc_issuer="https://idp.example.com",
            console_oidc_client_id="c",
        )
    with pytest.raises(SettingsError, match="production needs https"):
        load_settings(
            store="memory",
            env="production",
            auth_hs256_secret="s" * 40,
            public_url="https://ledger.example.com",
            console_oidc_issuer="http://idp.example.com",
            console_oidc_client_id="c",
        )
