"""The delivery records for admins: ``GET /webhook-deliveries`` (status filter,
cursor paging, the body and secret never shown), ``POST .../redeliver``, and
``ledger webhooks list|redeliver`` on the same SQLite file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import load_settings
from projections.webhooks import DELIVERY_VIEW
from tests.support.cli import assert_one_line_failure, invoke
from tests.support.http_helpers import API, Headers, assert_error_body
from tests.support.webhooks import seed


def test_failing_deliveries_page_by_cursor_without_their_bodies(
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    ids = seed(ledger)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"status": "failing", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = client.get(f"{API}/webhook-deliveries", params=params, headers=bearer("admin"))
        assert page.status_code == 200, page.text
        assert "CANARY" not in page.text and "body" not in page.json()["items"][0]
        seen += [item["delivery_id"] for item in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == ids[:5]  # oldest fact first, each once
    first = client.get(
        f"{API}/webhook-deliveries", params={"status": "failing"}, headers=bearer("admin")
    ).json()["items"][0]
    assert (first["last_error"], first["response_status"], first["attempts"]) == (
        "http_status",
        500,
        2,
    )
    bad = client.get(
        f"{API}/webhook-deliveries", params={"status": "lost"}, headers=bearer("admin")
    )
    assert bad.status_code == 422
    assert_error_body(bad.json(), 422)
    assert [e["pointer"] for e in bad.json()["errors"]] == ["/status"]
    assert (
        client.get(
            f"{API}/webhook-deliveries", params={"status": "failing"}, headers=bearer("channel")
        ).status_code
        == 403
    )


def test_redeliver_makes_one_pending_and_due_now(
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    ids = seed(ledger)
    answer = client.post(f"{API}/webhook-deliveries/{ids[6]}/redeliver", headers=bearer("admin"))
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "pending"
    assert answer.json()["next_try_at"] == answer.json()["updated_at"]
    assert ledger.views is not None
    stored = ledger.views.get_view(DELIVERY_VIEW, ids[6])
    assert stored is not None and stored.version == 4 and stored.data["body"]["secret"] == "CANARY"
    missing = client.post(
        f"{API}/webhook-deliveries/whd_{'0' * 32}/redeliver", headers=bearer("admin")
    )
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


@pytest.fixture
def sqlite_env(tmp_path: Path) -> dict[str, str]:
    return {"LEDGER_STORE": "sqlite", "LEDGER_SQLITE_PATH": str(tmp_path / "l.db")}


def test_the_cli_lists_and_redelivers(sqlite_env: dict[str, str]) -> None:
    ledger = build_ledger(
        load_settings(store="sqlite", sqlite_path=sqlite_env["LEDGER_SQLITE_PATH"])
    )
    ids = seed(ledger, failing=2, delivered=1)
    ledger.close()
    listed = invoke(["webhooks", "list"], **sqlite_env)
    assert listed.exit_code == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ids[:2]
    assert lines[0].split()[1:4] == ["failing", "attempt.succeeded", f"att_{0:064d}"]
    assert "last_error=http_status response_status=500" in lines[0]
    assert "CANARY" not in listed.stdout
    delivered = invoke(["webhooks", "list", "--status", "delivered", "--json"], **sqlite_env)
    assert delivered.exit_code == 0 and '"status": "delivered"' in delivered.stdout

    again = invoke(["webhooks", "redeliver", ids[2]], **sqlite_env)
    assert again.exit_code == 0, again.stderr
    pending = invoke(["webhooks", "list", "--status", "pending"], **sqlite_env)
    assert pending.stdout.split()[0] == ids[2]

    assert_one_line_failure(
        invoke(["webhooks", "redeliver", "whd_nope"], **sqlite_env),
        "no webhook delivery 'whd_nope'",
    )


def test_an_empty_list_says_so_on_stderr(sqlite_env: dict[str, str], tmp_path: Path) -> None:
    for status in ("failing", "pending", "delivered"):
        listed = invoke(["webhooks", "list", "--status", status], **sqlite_env)
        assert listed.exit_code == 0, listed.stderr
        assert listed.stdout == ""  # scripts reading one line per delivery read none
        assert listed.stderr.strip() == (
            f"no {status} webhook deliveries; no [[webhook]] subscription is configured "
            "(see LEDGER_EXECUTORS_FILE)"
        )
    subscribed = tmp_path / "webhooks.toml"
    subscribed.write_text(
        '[[webhook]]\nurl = "http://127.0.0.1:9/hook"\nsecret = "env:HOOK_SECRET"\n'
        'events = ["attempt.succeeded"]\n'
    )
    env = {**sqlite_env, "LEDGER_EXECUTORS_FILE": str(subscribed), "HOOK_SECRET": "s" * 32}
    listed = invoke(["webhooks", "list", "--json"], **env)
    assert listed.exit_code == 0, listed.stderr
    assert (listed.stdout, listed.stderr.strip()) == ("", "no failing webhook deliveries")


@pytest.mark.parametrize(
    "args",
    [["webhooks", "--help"], ["webhooks", "list", "--help"], ["webhooks", "redeliver", "--help"]],
    ids=" ".join,
)
def test_the_webhook_commands_have_help(args: list[str]) -> None:
    result = invoke(args)
    assert result.exit_code == 0 and "Usage: ledger webhooks" in result.stdout


def test_executors_check_refuses_a_bad_webhook_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "hooks.toml"
    path.write_text(
        '[[webhook]]\nid = "chat"\nurl = "https://chat.example/hooks"\n'
        'secret = "env:HOOK_SECRET"\nevents = ["attempt.exploded"]\n'
    )
    env = {
        "LEDGER_STORE": "memory",
        "LEDGER_EXECUTORS_FILE": str(path),
        "HOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    }
    assert_one_line_failure(
        invoke(["executors", "check"], **env), "[[webhook]] #1 (chat): events.0"
    )
    path.write_text(path.read_text().replace("attempt.exploded", "attempt.succeeded"))
    assert invoke(["executors", "check"], **env).exit_code == 0
    assert_one_line_failure(
        invoke(["executors", "check"], **{**env, "HOOK_SECRET": ""}),
        "environment variable HOOK_SECRET is not set",
    )
