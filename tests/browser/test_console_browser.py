"""The console in a real headless Chromium (Debian's package), driven by Playwright.

No browser is downloaded: Playwright launches ``/usr/bin/chromium`` (CI installs
it, see .ci/run). A real ``ledger serve`` runs the worker, which leaves two
attempts in ``outcome_unknown``: once on a temporary SQLite store and once on
a DynamoDB table of the emulator (one server per store for the module). Then, as an admin:
sign in, find the attempt in the attention list, open it, resolve it and see it
leave the list; a form gone stale shows the conflict in words; and a non-admin
reaches no console page. ``LEDGER_CONSOLE_SCREENSHOTS=docs`` writes the README's
screenshots (from the SQLite run).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.dynamodb.schema import create_table
from adapters.executors.fake import fake_build_digest
from adapters.settings import load_settings
from api.http.auth import mint_token
from domain.timeutil import format_utc
from tests.support.dynamodb_fixtures import new_table_name
from tests.support.http_helpers import PROVENANCE, directory_puts, spec
from tests.support.http_server import free_port, ledger_command, wait_until_up

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]

if not CHROMIUM.exists():
    if os.environ.get("LEDGER_REQUIRE_BROWSER"):  # CI: .ci/run installs it; never skip there
        raise RuntimeError("LEDGER_REQUIRE_BROWSER is set but /usr/bin/chromium is missing")
    pytest.skip(
        "needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
        allow_module_level=True,
    )


@dataclass
class Served:
    base: str
    admin: str
    actor: str
    proposer: str
    unknown: list[str]
    store: str


def _api(base: str) -> str:
    return f"{base}/api/conversational"


def _make_unknown(http: httpx.Client, base: str, tokens: dict[str, str]) -> str:
    capability = "fake.operator_only"
    created = http.post(
        f"{_api(base)}/proposals",
        headers=tokens["proposer"],
        json={
            "actor_id": PROVENANCE.actor_id,
            "spec": spec(
                capability,
                executor_build=fake_build_digest(capability),
                content={"simulate": "timeout_after_effect"},
                expires_at=format_utc(datetime.now(UTC) + timedelta(days=1)),
            ),
        },
    )
    assert created.status_code == 201, created.text
    shown = http.post(
        f"{_api(base)}/proposals/{created.json()['proposal_id']}/presentations",
        headers=tokens["proposer"],
        json={
            "version": 1,
            "identity_binding_id": PROVENANCE.identity_binding_id,
            "channel_binding_id": PROVENANCE.channel_binding_id,
            "conversation_key": PROVENANCE.conversation_key,
        },
    )
    approved = http.post(
        f"{_api(base)}/approvals", headers=tokens["channel"], json={"token": shown.json()["token"]}
    )
    assert approved.status_code == 202, approved.text
    attempt_id: str = approved.json()["attempt_id"]
    for _ in range(300):  # the server's worker settles it; bounded wait, no timing assertion
        view = http.get(
            f"{_api(base)}/execution-attempts/{attempt_id}", headers=tokens["admin"]
        ).json()
        # a busy store may answer 503 for a moment; only the settled status ends the wait
        if view.get("status") == "outcome_unknown":
            return attempt_id
        time.sleep(0.1)
    raise AssertionError(f"attempt never reached outcome_unknown: {view}")


@contextlib.contextmanager
def _store_env(store: str, tmp: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The environment of a ``ledger serve`` on ``store`` (a fresh emulator table)."""
    if store == "sqlite":
        yield {"LEDGER_SQLITE_PATH": str(tmp / "ledger.db")}
        return
    endpoint = request.getfixturevalue("dynamodb_endpoint")
    client = request.getfixturevalue("dynamodb_client")
    table = new_table_name()
    create_table(client, table)
    try:
        yield {
            "LEDGER_STORE": "dynamodb",
            "LEDGER_DYNAMODB_TABLE": table,
            "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
            "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
    finally:
        with contextlib.suppress(Exception):
            client.delete_table(TableName=table)


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("dynamodb", marks=[pytest.mark.dynamodb, pytest.mark.slow])],
)
def served(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Served]:
    with _store_env(request.param, tmp_path_factory.mktemp("console"), request) as where:
        yield from _serve(request.param, tmp_path_factory, where)


def _serve(
    store: str, tmp_path_factory: pytest.TempPathFactory, where: dict[str, str]
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"console-{store}")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "OTEL_", "AWS_"))}
    env.update({**where, "PYTHONUNBUFFERED": "1"})
    settings = load_settings(env="development")
    header = {
        role: {
            "Authorization": "Bearer "
            + mint_token(
                settings,
                subject=subject,
                role=role,
                provenance=PROVENANCE if role == "channel" else None,
            )
        }
        for role, subject in (
            ("admin", "ops"),
            ("proposer", "assistant-backend"),
            ("channel", "chat-backend"),
            ("actor", "alice"),
        )
    }
    log = tmp / "serve.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [*ledger_command(), "serve", "--port", str(port)],
            cwd=tmp,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_up(server, f"{base}/healthz", log)
            with httpx.Client(timeout=10) as http:
                for path, body in directory_puts():
                    answer = http.put(
                        f"{_api(base)}/directory{path}", json=body, headers=header["admin"]
                    )
                    assert answer.status_code == 200, answer.text
                unknown = [_make_unknown(http, base, header) for _ in range(2)]
            yield Served(
                base=base,
                admin=header["admin"]["Authorization"].split()[1],
                actor=header["actor"]["Authorization"].split()[1],
                proposer=header["proposer"]["Authorization"].split()[1],
                unknown=unknown,
                store=store,
            )
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
            viewport={"width": 1200, "height": 900},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def _shot(page: Any, name: str, served: Served) -> None:
    target = os.environ.get("LEDGER_CONSOLE_SCREENSHOTS")
    if target and served.store == "sqlite":  # one set of pictures, the same pages
        page.screenshot(path=str(ROOT / target / f"console-{name}.png"), full_page=True)


def _sign_in(page: Any, base: str, token: str) -> None:
    page.goto(f"{base}/console")
    assert page.url.endswith("/console/signin")
    page.fill("#token", token)
    page.click("button[type=submit]")


def test_an_admin_resolves_an_unknown_attempt_and_it_leaves_the_list(
    served: Served, page: Any
) -> None:
    first = served.unknown[0]
    _sign_in(page, served.base, served.admin)
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
    assert page.locator(f"a[href='/console/attempts/{first}']").count() == 1
    _shot(page, "attempts", served)


def test_a_stale_form_shows_the_conflict(served: Served, page: Any) -> None:
    second = served.unknown[1]
    _sign_in(page, served.base, served.admin)
    page.goto(f"{served.base}/console/attempts/{second}")
    page.fill("#reason", "provider console shows nothing")
    page.check("input[name=resolution][value=no_effect]")
    # another admin settles it first, through the API
    revision = int(page.locator("#resolve input[name=expected_revision]").input_value())
    other = httpx.post(
        f"{_api(served.base)}/execution-attempts/{second}/resolve",
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
    _sign_in(page, served.base, served.proposer)
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


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_fits_the_screen(served: Served, page: Any, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    _sign_in(page, served.base, served.admin)
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
