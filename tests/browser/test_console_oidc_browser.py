"""OpenID Connect sign-in in a real headless Chromium: a real ``ledger serve``
and Authlib's authorization server on another site (``localhost`` against the
ledger's ``127.0.0.1``), so the provider's redirect back is a cross-site
navigation, as with a real provider. The admin ends on the console with its
SameSite=Strict session; a user without the admin claim gets the refusal page."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.console.oidc import REFUSED
from tests.support.http_server import free_port, ledger_command, wait_until_up
from tests.support.oidc_provider import OidcProvider

pytestmark = pytest.mark.slow  # a server and a browser

CHROMIUM = Path("/usr/bin/chromium")  # Debian's, as the console's other browser test
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
if not CHROMIUM.exists():
    if os.environ.get("LEDGER_REQUIRE_BROWSER"):  # CI installs it; never skip there
        raise RuntimeError("LEDGER_REQUIRE_BROWSER is set but /usr/bin/chromium is missing")
    pytest.skip("needs Debian's chromium at /usr/bin/chromium", allow_module_level=True)

USERS = {"alice": {"groups": ["ledger-admins"]}, "bob": {"groups": ["staff"]}}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("console-oidc")
    port = free_port()
    ledger = f"http://127.0.0.1:{port}"
    with OidcProvider(
        USERS,
        client_id="ledger-console",
        redirect_uri=ledger + "/console/oidc/callback",
        host="localhost",
    ) as idp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "OTEL_"))}
        env.update(
            {
                "LEDGER_SQLITE_PATH": str(tmp / "ledger.db"),
                "LEDGER_PUBLIC_URL": ledger,
                "LEDGER_CONSOLE_OIDC_ISSUER": idp.issuer,
                "LEDGER_CONSOLE_OIDC_CLIENT_ID": idp.client.client_id,
                "LEDGER_CONSOLE_OIDC_CLIENT_SECRET": idp.client.client_secret,
                "LEDGER_CONSOLE_OIDC_SCOPE": "openid groups",
                "PYTHONUNBUFFERED": "1",
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


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            user_data_dir=str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def _through_the_provider(page: Any, base: str, user: str) -> None:
    page.goto(f"{base}/console")
    page.click("a[href='/console/oidc/start']")
    assert page.url.startswith("http://localhost:")
    page.fill("input[name=username]", user)
    page.click("button")


def test_an_admin_arrives_on_the_console_and_signs_out(base: str, page: Any) -> None:
    _through_the_provider(page, base, "alice")
    page.wait_for_url(f"{base}/console", timeout=10_000)
    assert page.locator("header .signout span").inner_text() == "alice"
    page.click(".signout button")
    page.wait_for_url(f"{base}/console/signin")
    page.goto(f"{base}/console")
    assert page.url == f"{base}/console/signin"


def test_a_user_without_the_admin_claim_gets_the_refusal(base: str, page: Any) -> None:
    _through_the_provider(page, base, "bob")
    page.wait_for_url(f"{base}/console/oidc/callback*", timeout=10_000)
    assert page.locator("[role=alert]").inner_text() == REFUSED
    page.goto(f"{base}/console")
    assert page.url == f"{base}/console/signin"
