"""What the console's browser tests share: Debian's headless Chromium (never a
downloaded browser), launched once for the package with a fresh context per
test, and one real ``ledger serve`` per store (SQLite, and a DynamoDB table of
the emulator) with the states the tests open, made once through the HTTP API:
attempts in ``outcome_unknown``, ``failed_safe`` and ``succeeded``, webhook
deliveries failing against a closed port, and one attempt of a build the server
does not host, proposed through a ledger in the test process that hosts it
(``queue_unhosted``): it stays queued, ``waiting_for_build`` after
``WAITING_SECONDS``."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.bootstrap import build_ledger
from adapters.dynamodb.schema import create_table
from adapters.executors.fake import fake_build_digest
from adapters.settings import load_settings
from api.embedded import EmbeddedLedger
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
STORES = ["sqlite", pytest.param("dynamodb", marks=[pytest.mark.dynamodb, pytest.mark.slow])]
"""The store parametrization of every browser test (the emulator's runs are slow)."""
WIDTHS = [1280, 390]
"""The screen widths every console page is checked at: a laptop and a phone."""
TITLE = "Call the plumber"
"""The content of the attempts' proposals: only behind Reveal on the console."""
WAITING_SECONDS = 10
"""The served servers' LEDGER_WAITING_FOR_BUILD_SECONDS (its least allowed value)."""
UNHOSTED = "tasks.create"
"""The capability of the build only the test process hosts (an ``[[http]]`` entry)."""


def require_chromium() -> None:
    """Skip the calling test module without Debian's chromium; fail in CI instead."""
    if CHROMIUM.exists():
        return
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
    channel: str
    """The chat backend's token: with the proposer's, it approves a new action."""
    unknown: list[str]
    store: str
    where: dict[str, str] = field(default_factory=dict)
    """The store's settings (environment) of the server."""
    what: str = ""
    """An outcome_unknown attempt of an operator-only build, only ever looked at."""
    succeeded: str = ""
    """A succeeded attempt: its receipt is on its page."""
    failed: dict[int, str] = field(default_factory=dict)
    """A failed_safe attempt per screen width, each acknowledged by one test."""
    older_failed: str = ""
    """A failed_safe attempt made before the others, never acknowledged."""
    waiting: str = ""
    """A queued attempt of a build the server does not host, made first."""
    waiting_build: str = ""
    """That attempt's build digest."""


def api(base: str) -> str:
    return f"{base}/api/conversational"


def make_attempt(
    http: httpx.Client, base: str, tokens: dict[str, dict[str, str]], capability: str, simulate: str
) -> str:
    """Propose, present and approve one fake action; the server's worker runs it."""
    created = http.post(
        f"{api(base)}/proposals",
        headers=tokens["proposer"],
        json={
            "actor_id": PROVENANCE.actor_id,
            "spec": spec(
                capability,
                executor_build=fake_build_digest(capability),
                content={"title": TITLE, "simulate": simulate},
                expires_at=format_utc(datetime.now(UTC) + timedelta(days=1)),
            ),
        },
    )
    assert created.status_code == 201, created.text
    shown = http.post(
        f"{api(base)}/proposals/{created.json()['proposal_id']}/presentations",
        headers=tokens["proposer"],
        json={
            "version": 1,
            "identity_binding_id": PROVENANCE.identity_binding_id,
            "channel_binding_id": PROVENANCE.channel_binding_id,
            "conversation_key": PROVENANCE.conversation_key,
        },
    )
    approved = http.post(
        f"{api(base)}/approvals", headers=tokens["channel"], json={"token": shown.json()["token"]}
    )
    assert approved.status_code == 202, approved.text
    attempt_id: str = approved.json()["attempt_id"]
    return attempt_id


def settled(
    http: httpx.Client, base: str, tokens: dict[str, dict[str, str]], attempt_id: str, status: str
) -> str:
    """Wait (bounded, no timing assertion) until the server's worker settled the attempt."""
    view: dict[str, Any] = {}
    for _ in range(300):
        view = http.get(
            f"{api(base)}/execution-attempts/{attempt_id}", headers=tokens["admin"]
        ).json()
        # a busy store may answer 503 for a moment; only the settled status ends the wait
        if view.get("status") == status:
            return attempt_id
        time.sleep(0.1)
    raise AssertionError(f"attempt never reached {status}: {view}")


@contextlib.contextmanager
def store_env(store: str, tmp: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
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


def server_env(where: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "OTEL_", "AWS_"))}
    env.update({**where, "PYTHONUNBUFFERED": "1"})
    return env


def queue_unhosted(
    http: httpx.Client,
    base: str,
    tokens: dict[str, dict[str, str]],
    where: dict[str, str],
    tmp: Path,
    dynamodb_client: Any | None,
) -> tuple[str, str]:
    """An approved attempt, and its build, of a build the server does not host.

    The proposal is made through a ledger in this process whose executors file
    has one ``[[http]]`` build of ``UNHOSTED`` (proposing needs the build where
    it is proposed; approving does not), and approved through the server. This
    process runs no worker and the server's own lacks the build, so nothing
    ever takes it: its URL is a closed port that is never called."""
    executors = tmp / "unhosted-executors.toml"
    executors.write_text(
        f'[[http]]\ncapability = "{UNHOSTED}"\ndelivery_mode = "provider_idempotency"\n'
        f'url = "http://127.0.0.1:{free_port()}/v1/{{destination}}"\nreceipt = ["/id"]\n'
    )
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**where, "LEDGER_EXECUTORS_FILE": str(executors)}.items():
            patch.setenv(name, value)
        wiring = build_ledger(load_settings(env="development"), dynamodb_client=dynamodb_client)
    try:
        (build,) = [e for e in wiring.registry.entries() if e.capability == UNHOSTED]
        allowed = http.put(
            f"{api(base)}/directory/executor-builds/{UNHOSTED}/{build.build_digest}",
            json={"delivery_mode": build.delivery_mode.value, "available": True},
            headers=tokens["admin"],
        )
        assert allowed.status_code == 200, allowed.text
        proposer = EmbeddedLedger(wiring, subject="assistant-backend", start=False)
        proposal = proposer.propose(
            PROVENANCE.actor_id,
            spec(
                UNHOSTED,
                executor_build=build.build_digest,
                schema_digest=build.schema_digest,
                content={"title": TITLE},
                expires_at=format_utc(datetime.now(UTC) + timedelta(days=1)),
            ),
        )
        shown = proposer.present(
            proposal.proposal_id,
            version=1,
            identity_binding_id=PROVENANCE.identity_binding_id,
            channel_binding_id=PROVENANCE.channel_binding_id,
            conversation_key=PROVENANCE.conversation_key,
        )
    finally:
        if dynamodb_client is None:  # the emulator's client is the session's
            wiring.close()
    approved = http.post(
        f"{api(base)}/approvals", headers=tokens["channel"], json={"token": shown.token}
    )
    assert approved.status_code == 202, approved.text
    return str(approved.json()["attempt_id"]), build.build_digest


def serve(
    store: str,
    tmp_path_factory: pytest.TempPathFactory,
    where: dict[str, str],
    dynamodb_client: Any | None = None,
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"console-{store}")
    port = free_port()
    # every fact is also sent to a subscriber that never answers: a closed port
    hooks = tmp / "hooks.toml"
    hooks.write_text(
        f'[[webhook]]\nid = "chat"\nurl = "http://127.0.0.1:{free_port()}/hook"\n'
        'secret = "env:HOOK_SECRET"\ntimeout_seconds = 1\n'
        'events = ["attempt.succeeded", "attempt.failed_safe", "attempt.outcome_unknown"]\n'
    )
    env = server_env(
        {
            **where,
            "LEDGER_EXECUTORS_FILE": str(hooks),
            "HOOK_SECRET": "s" * 32,
            "LEDGER_WAITING_FOR_BUILD_SECONDS": str(WAITING_SECONDS),
        }
    )
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
                        f"{api(base)}/directory{path}", json=body, headers=header["admin"]
                    )
                    assert answer.status_code == 200, answer.text
                # first, so that its wait overlaps the settling of the others
                waiting, waiting_build = queue_unhosted(
                    http, base, header, where, tmp, dynamodb_client
                )
                # approved one after the other (newest last), settled together
                made = [
                    (make_attempt(http, base, header, capability, simulate), status)
                    for capability, simulate, status in (
                        ("fake.provider_idempotency", "no_write_error", "failed_safe"),
                        *[("fake.operator_only", "timeout_after_effect", "outcome_unknown")] * 3,
                        ("fake.provider_idempotency", "success", "succeeded"),
                        *[("fake.provider_idempotency", "no_write_error", "failed_safe")] * 2,
                    )
                ]
                ids = [settled(http, base, header, a, status) for a, status in made]
            yield Served(
                base=base,
                admin=header["admin"]["Authorization"].split()[1],
                actor=header["actor"]["Authorization"].split()[1],
                proposer=header["proposer"]["Authorization"].split()[1],
                channel=header["channel"]["Authorization"].split()[1],
                unknown=ids[1:3],
                store=store,
                where=where,
                what=ids[3],
                succeeded=ids[4],
                failed=dict(zip(WIDTHS, ids[5:7], strict=True)),
                older_failed=ids[0],
                waiting=waiting,
                waiting_build=waiting_build,
            )
        finally:
            server.terminate()
            server.wait(timeout=15)


def sign_in(page: Any, base: str, token: str) -> None:
    page.goto(f"{base}/console")
    assert page.url.endswith("/console/signin")
    page.fill("#token", token)
    page.click("button[type=submit]")


def until_listed(page: Any, selector: str, seconds: float) -> None:
    """Reload the page until ``selector`` is on it, for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while page.locator(selector).count() == 0 and time.monotonic() < deadline:
        time.sleep(0.25)
        page.reload()
    assert page.locator(selector).count() == 1, f"{selector} never listed"


def reachable(page: Any, selector: str, width: int) -> Any:
    """The control is on the screen at this width (visible, inside the viewport), then
    clicked; a page the click opens is loaded before this returns (the click waits
    only until it starts loading, when its document may not exist yet)."""
    control = page.locator(selector)
    control.scroll_into_view_if_needed()
    assert control.is_visible(), (selector, width)
    box = control.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (selector, box)
    control.click()
    page.wait_for_load_state("load")
    return control
