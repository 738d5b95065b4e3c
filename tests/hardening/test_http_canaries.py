"""Secret canaries of the http executor (I10): the values of `env:` headers and of the
webhook secret never appear in events, views, responses, DEBUG logs, metrics, the audit
output, the CLI or error bodies, on a production-mode ledger against the reference
provider. The search is proven to catch a leak when the receipt rules are switched off."""

from __future__ import annotations

import base64
import json
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import load_settings
from api.http.app import create_app
from api.http.auth import mint_token
from domain.redaction import looks_secret
from projections.audit import audit_attempt
from tests.support.cli import invoke
from tests.support.clocks import FixedClock
from tests.support.http_executors import HTTP_MODES, executors_toml
from tests.support.http_helpers import API, DIRECTORY, FIXED_NOW, PROVENANCE, directory_puts, spec
from tests.support.provider_fixtures import Provider, start_provider, stop_provider
from tests.support.runtime_loops import run_loops
from tests.support.webhook_capture import CapturingTransport

pytestmark = pytest.mark.slow  # subprocess servers and real timeouts

RUN = uuid.uuid4().hex[:12].upper()
PROVIDER_SECRET = f"sk_live_HEADER{RUN}"
CANARIES = {
    "authorization": f"Bearer {PROVIDER_SECRET}",
    "provider_secret": PROVIDER_SECRET,
    "api_key": f"ghp_APIKEY{RUN}abcdefghijklmnop",
    # a valid Standard Webhooks secret: whsec_ and the base64 of the key
    "webhook_secret": "whsec_" + base64.b64encode(f"{RUN}sk_live_WEBHOOK".encode()).decode(),
}
SECRET_ENV = {
    "TASKS_TOKEN": CANARIES["authorization"],
    "TASKS_API_KEY": CANARIES["api_key"],
    "LEDGER_WEBHOOK_SECRET": CANARIES["webhook_secret"],
}
PROD = {"env": "production", "auth_hs256_secret": "c" * 48}


@pytest.fixture
def canary_provider() -> Iterator[Provider]:
    process, running = start_provider(PROVIDER_SECRET)
    try:
        yield running
    finally:
        stop_provider(process)


@pytest.fixture
def http_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, canary_provider: Provider
) -> Iterator[tuple[Ledger, Any, Path]]:
    for name in list(os.environ):
        if name.startswith("LEDGER_"):
            monkeypatch.delenv(name)
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "executors.toml"
    text = executors_toml(canary_provider.url, timeout=2).replace(
        'headers = { Authorization = "env:TASKS_TOKEN" }',
        'headers = { Authorization = "env:TASKS_TOKEN", X-Api-Key = "env:TASKS_API_KEY" }',
    )
    path.write_text(
        text + '\n[[webhook]]\nurl = "https://chat.example/ledger-events"\n'
        'secret = "env:LEDGER_WEBHOOK_SECRET"\nevents = ["attempt.succeeded"]\n'
    )
    settings = load_settings(
        store="sqlite", sqlite_path=str(tmp_path / "l.db"), executors_file=str(path), **PROD
    )
    ledger = build_ledger(settings, clock=FixedClock(FIXED_NOW))
    yield ledger, settings, path
    ledger.close()


def builds(ledger: Ledger) -> dict[str, tuple[str, str]]:
    return {
        e.delivery_mode.value: (e.capability, e.build_digest) for e in ledger.registry.entries()
    }


def run_life(
    ledger: Ledger,
    settings: Any,
    path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> tuple[list[str], dict[str, str]]:
    caplog.set_level(logging.DEBUG)
    for name in list(logging.root.manager.loggerDict):
        if name not in ("httpx", "httpcore"):  # those two are kept quiet on purpose
            logging.getLogger(name).setLevel(logging.NOTSET)
    auth = {
        role: {
            "Authorization": "Bearer "
            + mint_token(
                settings,
                subject=role,
                role=role,
                provenance=PROVENANCE if role == "channel" else None,
            )
        }
        for role in ("admin", "proposer", "channel", "actor")
    }
    auth["actor"] = {
        "Authorization": "Bearer " + mint_token(settings, subject="alice", role="actor")
    }
    outputs: list[str] = []
    found = builds(ledger)
    with TestClient(create_app(settings, ledger=ledger)) as client:

        def call(method: str, url: str, **kwargs: Any) -> Any:
            response = client.request(method, url, **kwargs)
            outputs.extend([response.text, json.dumps(dict(response.headers))])
            return response

        puts = [p for p in directory_puts() if "executor-builds" not in p[0]]
        puts += [
            (f"/executor-builds/{cap}/{digest}", {"delivery_mode": mode, "available": True})
            for mode, (cap, digest) in found.items()
        ]
        for url, body in puts:
            assert call("PUT", DIRECTORY + url, json=body, headers=auth["admin"]).is_success

        def approved(mode: str, content: dict[str, Any]) -> str:
            capability, digest = found[mode]
            created = client.post(
                f"{API}/proposals",
                headers=auth["proposer"],
                json={
                    "actor_id": "alice",
                    "spec": spec(capability, executor_build=digest, content=content),
                },
            )
            assert created.status_code == 201, created.text
            shown = client.post(
                f"{API}/proposals/{created.json()['proposal_id']}/presentations",
                headers=auth["proposer"],
                json={
                    "version": 1,
                    "identity_binding_id": "ib-alice-slack",
                    "channel_binding_id": "cb-general",
                    "conversation_key": "C042",
                },
            )
            answer = call(
                "POST",
                f"{API}/approvals",
                headers=auth["channel"],
                json={"token": shown.json()["token"]},
            )
            assert answer.status_code == 202, answer.text
            attempt_id: str = answer.json()["attempt_id"]
            return attempt_id

        attempts = {
            "success": approved("provider_idempotency", {"title": "a"}),
            "echo": approved("provider_idempotency", {"fault": "echo_auth"}),
            "rejected": approved("provider_idempotency", {"fault": "reject_4xx"}),
            "dropped": approved("correlation_lookup", {"fault": "drop_after_effect"}),
            "operator": approved("operator_reconciliation_only", {"fault": "error_5xx"}),
        }
        run_loops(ledger, work=list(attempts.values()))
        assert isinstance(ledger.clock, FixedClock)
        ledger.clock.advance(3600)
        run_loops(ledger, recover=True)
        run_loops(ledger, project=list(attempts.values()))
        # the [[webhook]] of the file: every delivery's headers and body as sent
        assert [w.secret_env for w in ledger.webhooks] == ["LEDGER_WEBHOOK_SECRET"]
        sent = CapturingTransport()
        deliverer = ledger.make_deliverer(transport=sent, random=lambda: 0.0)
        while deliverer.run_once():
            pass
        assert len(sent.requests) >= 2  # the succeeded attempts
        outputs += [json.dumps(headers) + body.decode() for headers, body in sent.requests]
        call(
            "GET",
            f"{API}/webhook-deliveries",
            headers=auth["admin"],
            params={"status": "delivered"},
        )
        for attempt_id in attempts.values():
            view = call("GET", f"{API}/execution-attempts/{attempt_id}", headers=auth["admin"])
            call("GET", f"{API}/execution-attempts/{attempt_id}", headers=auth["actor"])
            call("GET", f"{API}/execution-attempts/{attempt_id}/events", headers=auth["admin"])
            if view.json()["status"] == "outcome_unknown":
                call(
                    "POST",
                    f"{API}/execution-attempts/{attempt_id}/reconcile",
                    headers=auth["admin"],
                    json={"expected_revision": view.json()["revision"]},
                )
        for state in ("succeeded", "failed_safe", "outcome_unknown"):
            call(
                "GET", f"{API}/execution-attempts", headers=auth["admin"], params={"status": state}
            )
        outputs.append(call("GET", "/metrics").text)
        statuses = {
            name: call("GET", f"{API}/execution-attempts/{a}", headers=auth["admin"]).json()[
                "status"
            ]
            for name, a in attempts.items()
        }

    with ledger.store.recorder.datastore.transaction(commit=False) as cursor:  # type: ignore[attr-defined]
        for table in ("stored_events", "ledger_views"):
            cursor.execute(f"SELECT * FROM {table}")
            outputs += [repr(tuple(row)) for row in cursor.fetchall()]
    for attempt_id in attempts.values():
        outputs.append(json.dumps(audit_attempt(ledger.store, ledger.views, attempt_id)))
    env = {
        "LEDGER_SQLITE_PATH": settings.sqlite_path,
        "LEDGER_STORE": "sqlite",
        "LEDGER_EXECUTORS_FILE": str(path),
        "LEDGER_ENV": "production",
        "LEDGER_AUTH_HS256_SECRET": "c" * 48,
        **SECRET_ENV,
    }
    for args in (
        ["executors"],
        ["executors", "check"],
        *[["audit", a, "--json"] for a in attempts.values()],
    ):
        result = invoke(args, **env)
        assert result.exit_code == 0, result.stderr
        outputs += [result.stdout, result.stderr]
    broken = invoke(["executors", "check"], **{**env, "TASKS_API_KEY": ""})
    assert broken.exit_code == 1 and "TASKS_API_KEY is not set" in broken.stderr
    outputs += [broken.stdout, broken.stderr]
    outputs += [
        logging.Formatter("%(name)s %(levelname)s %(message)s").format(record)
        for record in caplog.records
    ]
    outputs.append(capsys.readouterr().out)
    assert len(caplog.records) >= 6  # the worker and recovery logged: capture works
    return outputs, statuses


def search(outputs: list[str]) -> dict[str, int]:
    return {name: sum(text.count(value) for text in outputs) for name, value in CANARIES.items()}


def test_no_header_or_webhook_secret_leaves_through_any_output(
    http_ledger: tuple[Ledger, Any, Path],
    canary_provider: Provider,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for value in CANARIES.values():
        assert looks_secret(value)
    outputs, statuses = run_life(*http_ledger, caplog, capsys)
    assert statuses == {
        "success": "succeeded",
        "echo": "outcome_unknown",
        "rejected": "failed_safe",
        "dropped": "succeeded",
        "operator": "outcome_unknown",
    }
    assert max(canary_provider.effects().values()) == 1
    counts = search(outputs)
    print(f"http canary search: {len(outputs)} outputs, counts {counts}")
    assert counts == dict.fromkeys(CANARIES, 0)


def test_the_search_finds_the_echoed_credential_when_the_receipt_rules_are_off(
    http_ledger: tuple[Ledger, Any, Path],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from domain.services import dispatch

    monkeypatch.setattr(dispatch, "validate_receipt", lambda data: dict(data or {}))
    outputs, statuses = run_life(*http_ledger, caplog, capsys)
    assert statuses["echo"] == "succeeded"
    assert search(outputs)["authorization"] > 0


assert set(HTTP_MODES) == {
    "provider_idempotency",
    "correlation_lookup",
    "operator_reconciliation_only",
}
