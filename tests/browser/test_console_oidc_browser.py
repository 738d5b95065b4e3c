"""OpenID Connect sign-in in a real headless Chromium: a real ``ledger serve``
and Authlib's authorization server on another site (``localhost`` against the
ledger's ``127.0.0.1``), so the provider's redirect back is a cross-site
navigation, as with a real provider. The admin ends on the console with its
SameSite=Strict session; a user without the admin claim gets the refusal page.
On SQLite and on a DynamoDB table of the emulator (the sessions live in the store)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.console.oidc import REFUSED
from tests.support.browser import (
    STORES,
    WIDTHS,
    reachable,
    require_chromium,
    server_env,
    store_env,
)
from tests.support.http_server import free_port, ledger_command, wait_until_up
from tests.support.oidc_provider import OidcProvider

require_chromium()

pytestmark = pytest.mark.parametrize("width", WIDTHS)

USERS = {"alice": {"groups": ["ledger-admins"]}, "bob": {"groups": ["staff"]}}


@pytest.fixture(scope="module", params=STORES)
def base(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("console-oidc")
    with store_env(request.param, tmp, request) as where:
        yield from _serve(tmp, where)


def _serve(tmp: Path, where: dict[str, str]) -> Iterator[str]:
    port = free_port()
    ledger = f"http://127.0.0.1:{port}"
    with OidcProvider(
        USERS,
        client_id="ledger-console",
        redirect_uri=ledger + "/console/oidc/callback",
        host="localhost",
    ) as idp:
        env = server_env(
            {
                **where,
                "LEDGER_PUBLIC_URL": ledger,
                "LEDGER_CONSOLE_OIDC_ISSUER": idp.issuer,
                "LEDGER_CONSOLE_OIDC_CLIENT_ID": idp.client.client_id,
                "LEDGER_CONSOLE_OIDC_CLIENT_SECRET": idp.client.client_secret,
                "LEDGER_CONSOLE_OIDC_SCOPE": "openid groups",
            }
        )
        log = tmp / "serve.log"
        with log.open("wb") as sink:
            server = subprocess.Popen(
                [*ledger_command(), "serve", "--port", str(port), "--no-worker"],
                cwd=tmp,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
            try:
                wait_until_up(server, f"{ledger}/healthz", log)
                yield ledger
            finally:
                server.terminate()
                server.wait(timeout=15)


def _through_the_provider(page: Any, base: str, user: str, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{base}/console")
    reachable(page, "a[href='/console/oidc/start']", width)
    assert page.url.startswith("http://localhost:")
    page.fill("input[name=username]", user)
    page.click("button")


def test_an_admin_arrives_on_the_console_and_signs_out(base: str, page: Any, width: int) -> None:
    _through_the_provider(page, base, "alice", width)
    page.wait_for_url(f"{base}/console", timeout=10_000)
    assert page.locator("header .signout span").inner_text() == "alice"
    reachable(page, ".signout button", width)
    page.wait_for_url(f"{base}/console/signin")
    page.goto(f"{base}/console")
    assert page.url == f"{base}/console/signin"


def test_a_user_without_the_admin_claim_gets_the_refusal(base: str, page: Any, width: int) -> None:
    _through_the_provider(page, base, "bob", width)
    page.wait_for_url(f"{base}/console/oidc/callback*", timeout=10_000)
    assert page.locator("[role=alert]").inner_text() == REFUSED
    page.goto(f"{base}/console")
    assert page.url == f"{base}/console/signin"
