"""Redaction canaries (I10): secrets planted everywhere never come out anywhere.

Unique, secret-shaped canaries go into spec content, presentation tokens,
provider receipts (values and keys), a reconciler's receipt, an admin's
reason, executor and renderer errors, unknown request fields, malformed
bodies and stream records. Then the whole life runs (HTTP, the runtime's
worker / projector / recovery loops, admin reconcile and resolve, the audit
CLI, a projection rebuild, the Lambda worker). Every response, every log
record of every logger at DEBUG (tracebacks included), every stored view,
every audit output, every console page (HTML), the metrics, the Lambda's failure payloads and
output, and every webhook (headers and body as sent, the delivery records and their
list) are searched: zero occurrences.

Two answers carry caller input back by design and are left out: the
proposer's own preview (POST /proposals) and the one response that shows a
presentation token (POST .../presentations).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.executors.fake import fake_build_digest
from adapters.settings import Settings, load_settings
from adapters.webhooks.config import WebhookSubscription
from api.http.app import create_app
from api.http.auth import mint_token
from domain.errors import ExecutorNoEffect
from domain.notifications import NotificationType
from domain.ports import ExecutionReceipt, ExecutionRequest, ReconcileAnswer
from domain.redaction import looks_secret
from projections.audit import audit_attempt, mermaid_state_diagram
from tests.support.cli import invoke
from tests.support.clocks import FixedClock
from tests.support.console import sign_in
from tests.support.http_helpers import (
    API,
    DIRECTORY,
    FIXED_NOW,
    PROVENANCE,
    assert_error_body,
    directory_puts,
    spec,
)
from tests.support.runtime_loops import run_loops
from tests.support.webhook_capture import CapturingTransport

RUN = uuid.uuid4().hex[:12].upper()
CANARIES = {
    "content": f"sk_live_CONTENT{RUN}x9",
    "content_key": f"sk_live_CONTENTKEY{RUN}",
    "content_plain": f"plain-content-canary-{RUN}",  # content never leaves, secret-shaped or not
    "destination": f"ghp_DESTINATION{RUN}abcdefghijklmn",
    "source": f"xoxb-SOURCE{RUN}-1234567890",
    "receipt_value": f"AKIA{RUN[:12]}RCPT",
    "receipt_key": f"secret_receipt_key_{RUN.lower()}",
    "reconciler": f"sk_test_RECONCILER{RUN}",
    "reason": f"password=REASON{RUN}",
    "executor_error": f"-----BEGIN RSA PRIVATE KEY----- EXECUTOR{RUN}",
    "no_write_error": f"sk_live_NOWRITE{RUN}",
    "lookup_error": f"token: LOOKUP{RUN}",
    "renderer_error": f"Bearer RENDERER{RUN}",
    "unknown_field": f"sk_live_FIELD{RUN}",
    "malformed": f"sk_live_MALFORMED{RUN}",
    "unknown_token": f"sk_live_UNKNOWNTOKEN{RUN}",
    "stream_record": f"sk_live_STREAM{RUN}",
    "idempotency_key": f"sk_live_IDEMKEY{RUN}",
    "webhook_secret": "whsec_" + base64.b64encode(f"WEBHOOK{RUN}".encode()).decode(),
}
SECRET_SHAPED = [name for name in CANARIES if name not in ("content_plain", "receipt_key")]


class CanaryTokens:
    """Presentation tokens that are themselves secret-shaped canaries."""

    def __init__(self) -> None:
        self.issued: list[str] = []
        self._lock = threading.Lock()

    def new_token(self) -> str:
        with self._lock:
            token = f"sk_live_TOKEN{RUN}{len(self.issued):04d}" + uuid.uuid4().hex
            self.issued.append(token)
            return token

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{uuid.uuid4().hex}"


class PlantingExecutor:
    """A fake executor whose answers carry canaries (by the spec's ``plant`` value)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = inner.build_digest
        self.delivery_mode = inner.delivery_mode

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        plant = request.spec.content.get("plant")
        if plant == "receipt":
            receipt = self.inner.execute(request)
            return ExecutionReceipt(
                {**receipt.data, "note": CANARIES["receipt_value"], CANARIES["receipt_key"]: "x"}
            )
        if plant == "error":
            self.inner.execute(request)
            raise RuntimeError(CANARIES["executor_error"])
        if plant == "no_write":
            raise ExecutorNoEffect(CANARIES["no_write_error"])
        result: ExecutionReceipt = self.inner.execute(request)
        return result


class PlantingReconciler:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def lookup(self, request: ExecutionRequest) -> ReconcileAnswer:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError(CANARIES["lookup_error"])
        found = self.inner.lookup(request)
        if found.verdict == "applied":
            return ReconcileAnswer(
                "applied", {**(found.receipt or {}), "ref": CANARIES["reconciler"]}
            )
        answer: ReconcileAnswer = found
        return answer


class ExplodingRenderer:
    """The text renderer, except that it fails (with a canary) when told to."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.build = inner.build

    def render(self, spec: Any) -> str:
        if spec.content.get("plant") == "explode":
            raise RuntimeError(CANARIES["renderer_error"])
        text: str = self.inner.render(spec)
        return text


class Recorder:
    """Every response text the test saw, minus the two that echo input by design."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.texts: list[str] = []

    def __call__(self, method: str, path: str, *, echo: bool = False, **kwargs: Any) -> Any:
        response = self.client.request(method, path, **kwargs)
        if not echo:
            self.texts.append(response.text)
            self.texts.append(json.dumps(dict(response.headers)))
        return response


@pytest.fixture
def canary_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Ledger, Settings]]:
    for name in list(__import__("os").environ):
        if name.startswith("LEDGER_"):
            monkeypatch.delenv(name)
    settings = load_settings(store="sqlite", env="test", sqlite_path=str(tmp_path / "l.db"))
    ledger = build_ledger(settings, clock=FixedClock(FIXED_NOW), tokens=CanaryTokens())
    for capability in (
        "fake.provider_idempotency",
        "fake.correlation_lookup",
        "fake.operator_only",
    ):
        ledger.registry.replace(
            PlantingExecutor(ledger.registry.get(capability, fake_build_digest(capability)))
        )
    key = ("fake.correlation_lookup", fake_build_digest("fake.correlation_lookup"))
    ledger.registry._reconcilers[key] = PlantingReconciler(ledger.registry._reconcilers[key])
    ledger.renderer = ExplodingRenderer(ledger.renderer)
    ledger.webhooks = [
        WebhookSubscription(  # every notification, signed with a canary
            id="canary",
            url="https://chat.example/hooks",
            secret_env="LEDGER_WEBHOOK_SECRET",
            events=frozenset(NotificationType),
            secret=CANARIES["webhook_secret"],
        )
    ]
    yield ledger, settings
    ledger.close()


def test_no_canary_leaves_through_any_output(
    canary_ledger: tuple[Ledger, Settings],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    leaked = run_everything(*canary_ledger, caplog, capsys)
    assert not leaked, f"canaries found in outputs: {leaked}"


def test_the_search_finds_a_leak_when_a_guard_is_removed(
    canary_ledger: tuple[Ledger, Settings],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Prove the search can fail: accept every receipt as safe, and the receipt
    canaries reach the status views, the lists and the audit."""
    from domain.services import dispatch

    monkeypatch.setattr(dispatch, "validate_receipt", lambda data: dict(data or {}))
    leaked = run_everything(*canary_ledger, caplog, capsys, strict=False)
    assert "receipt_value" in leaked and "receipt_key" in leaked, leaked


def run_everything(
    ledger: Ledger,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    strict: bool = True,
) -> dict[str, int]:
    """The whole life with canaries planted; returns {canary: occurrences} of any found."""
    for name in SECRET_SHAPED:
        assert looks_secret(CANARIES[name]), name  # they are canaries of secrets
    caplog.set_level(logging.DEBUG)
    for name in list(logging.root.manager.loggerDict):
        logging.getLogger(name).setLevel(logging.NOTSET)
    admin_token = mint_token(settings, subject="ops", role="admin")
    tokens = {
        "admin": admin_token,
        "proposer": mint_token(settings, subject="assistant-backend", role="proposer"),
        "channel": mint_token(settings, subject="chat", role="channel", provenance=PROVENANCE),
        "actor": mint_token(settings, subject="alice", role="actor"),
        "metrics": mint_token(settings, subject="prometheus", role="metrics"),
    }
    auth = {role: {"Authorization": f"Bearer {token}"} for role, token in tokens.items()}
    outputs: list[str] = []

    with TestClient(create_app(settings, ledger=ledger)) as client:
        call = Recorder(client)
        for path, body in directory_puts():
            assert call("PUT", DIRECTORY + path, json=body, headers=auth["admin"]).is_success

        def approved(capability: str, plant: str) -> str:
            body = {
                "actor_id": "alice",
                "spec": spec(
                    capability,
                    executor_build=fake_build_digest(capability),
                    destination=CANARIES["destination"],
                    sources=[CANARIES["source"]],
                    content={
                        "plant": plant,
                        "secret": CANARIES["content"],
                        CANARIES["content_key"]: CANARIES["content_plain"],
                    },
                ),
            }
            created = call(
                "POST", f"{API}/proposals", json=body, headers=auth["proposer"], echo=True
            )  # the proposer's own preview comes back, by design
            assert created.status_code == 201, created.text
            proposal_id = created.json()["proposal_id"]
            shown = call(
                "POST",
                f"{API}/proposals/{proposal_id}/presentations",
                echo=True,
                headers=auth["proposer"],
                json={
                    "version": 1,
                    "identity_binding_id": "ib-alice-slack",
                    "channel_binding_id": "cb-general",
                    "conversation_key": "C042",
                },
            )
            token = shown.json()["token"]
            assert token.startswith("sk_live_TOKEN")
            proposals.append(proposal_id)
            first = call("POST", f"{API}/approvals", json={"token": token}, headers=auth["channel"])
            again = call("POST", f"{API}/approvals", json={"token": token}, headers=auth["channel"])
            assert first.status_code == again.status_code == 202, first.text
            attempt_id: str = first.json()["attempt_id"]
            return attempt_id

        proposals: list[str] = []
        attempts = {
            "success": approved("fake.provider_idempotency", "none"),
            "receipt": approved("fake.provider_idempotency", "receipt"),
            "error": approved("fake.correlation_lookup", "error"),
            "no_write": approved("fake.operator_only", "no_write"),
            "operator": approved("fake.operator_only", "error"),
        }
        run_loops(ledger, work=list(attempts.values()))
        assert isinstance(ledger.clock, FixedClock)
        ledger.clock.advance(3600)
        run_loops(ledger, recover=True)  # the correlation lookup fails (error canary)
        ledger.clock.advance(3600)
        run_loops(ledger, project=list(attempts.values()))

        admin = auth["admin"]
        uncertain = attempts["error"]
        status = call("GET", f"{API}/execution-attempts/{uncertain}", headers=admin).json()
        call(
            "POST",
            f"{API}/execution-attempts/{uncertain}/reconcile",
            headers=admin,
            json={"expected_revision": status["revision"]},
        )
        for attempt_id in (attempts["receipt"], attempts["operator"], uncertain):
            view = call("GET", f"{API}/execution-attempts/{attempt_id}", headers=admin).json()
            if view["status"] != "outcome_unknown":
                continue
            refused = call(
                "POST",
                f"{API}/execution-attempts/{attempt_id}/resolve",
                headers=admin,
                json={
                    "expected_revision": view["revision"],
                    "resolution": "effect_applied",
                    "reason": CANARIES["reason"],
                },
            )
            assert refused.status_code == 422
            if not strict:
                continue
            done = call(
                "POST",
                f"{API}/execution-attempts/{attempt_id}/resolve",
                headers=admin,
                json={
                    "expected_revision": view["revision"],
                    "resolution": "effect_applied",
                    "reason": "seen in the provider console",
                },
            )
            assert done.status_code == 200, done.text
        for attempt_id in attempts.values():
            for headers in (admin, auth["actor"], auth["channel"]):
                call("GET", f"{API}/execution-attempts/{attempt_id}", headers=headers)
            call("GET", f"{API}/execution-attempts/{attempt_id}/events", headers=admin)
            call(
                "GET",
                f"{API}/execution-attempts/{attempt_id}/events",
                headers=admin,
                params={"format": "mermaid"},
            )
        for state in (
            "queued",
            "executing",
            "succeeded",
            "failed_safe",
            "outcome_unknown",
            "manually_resolved",
        ):
            call("GET", f"{API}/execution-attempts", headers=admin, params={"status": state})
        statuses = {
            call("GET", f"{API}/execution-attempts/{a}", headers=admin).json()["status"]
            for a in attempts.values()
        }
        if strict:
            assert {"succeeded", "failed_safe", "manually_resolved"} <= statuses, statuses

        # hostile input: every refusal is uniform and echoes nothing
        for method, path, content, role in [
            (
                "POST",
                f"{API}/approvals",
                json.dumps({"token": CANARIES["unknown_token"]}),
                "channel",
            ),
            (
                "POST",
                f"{API}/approvals",
                json.dumps({"token": "x", CANARIES["unknown_field"]: 1}),
                "channel",
            ),
            ("POST", f"{API}/proposals", '{"actor_id": "' + CANARIES["malformed"], "proposer"),
            (
                "POST",
                f"{API}/proposals",
                json.dumps({"actor_id": "alice", "spec": spec(content={"plant": "explode"})}),
                "proposer",
            ),
            (
                "POST",
                f"{API}/proposals",
                json.dumps(
                    {
                        "actor_id": CANARIES["unknown_field"],
                        "spec": spec(permission=CANARIES["unknown_field"]),
                    }
                ),
                "proposer",
            ),
            (
                "PUT",
                f"{DIRECTORY}/actors/alice",
                json.dumps({"enabled": CANARIES["unknown_field"]}),
                "admin",
            ),
            (
                "POST",
                f"{API}/approvals",
                json.dumps({"token": "y", "pad": CANARIES["malformed"] * 5000}),
                "channel",
            ),
        ]:
            response = call(
                method,
                path,
                content=content,
                headers={**auth[role], "Content-Type": "application/json"},
            )
            assert 400 <= response.status_code < 600, response.text
            assert_error_body(response.json(), response.status_code)
        # the people around an approval: a declined proposal, a canceled one (with a
        # secret-shaped Idempotency-Key, retried), the proposal views and the inbox
        for plant in ("declined", "canceled"):
            body = {
                "actor_id": "alice",
                "spec": spec(
                    destination=CANARIES["destination"],
                    sources=[CANARIES["source"]],
                    content={
                        "plant": plant,
                        "secret": CANARIES["content"],
                        CANARIES["content_key"]: CANARIES["content_plain"],
                    },
                ),
            }
            created = call(
                "POST", f"{API}/proposals", json=body, headers=auth["proposer"], echo=True
            )
            proposal_id = created.json()["proposal_id"]
            proposals.append(proposal_id)
            shown = call(
                "POST",
                f"{API}/proposals/{proposal_id}/presentations",
                echo=True,
                headers=auth["proposer"],
                json={
                    "version": 1,
                    "identity_binding_id": "ib-alice-slack",
                    "channel_binding_id": "cb-general",
                    "conversation_key": "C042",
                },
            )
            if plant == "declined":
                for _ in range(2):
                    answer = call(
                        "POST",
                        f"{API}/declines",
                        headers=auth["channel"],
                        json={"token": shown.json()["token"]},
                    )
                    assert answer.status_code == 200, answer.text
            else:
                keyed = {**auth["proposer"], "Idempotency-Key": CANARIES["idempotency_key"]}
                for _ in range(2):
                    answer = call(
                        "POST",
                        f"{API}/proposals/{proposal_id}/cancel",
                        headers=keyed,
                        json={"version": 1},
                    )
                    assert answer.status_code == 200, answer.text
        call(
            "POST",
            f"{API}/declines",
            headers=auth["channel"],
            json={"token": CANARIES["unknown_token"]},
        )
        for proposal_id in proposals:
            for role in ("proposer", "channel", "admin"):
                call("GET", f"{API}/proposals/{proposal_id}", headers=auth[role])
        for state in ("presented", "claimed", "declined", "canceled", "expired"):
            for role in ("channel", "admin"):
                call(
                    "GET",
                    f"{API}/proposals",
                    headers=auth[role],
                    params={"actor_id": "alice", "status": state},
                )
        # the signed webhooks: every notification's headers and body as sent, and the
        # delivery records as admins see them
        run_loops(ledger, project=[])
        sent = CapturingTransport()
        deliverer = ledger.make_deliverer(transport=sent, random=lambda: 0.0)
        while deliverer.run_once():
            pass
        kinds = {json.loads(body)["type"] for _, body in sent.requests}
        assert {"attempt.succeeded", "attempt.outcome_unknown", "proposal.declined"} <= kinds
        outputs += [json.dumps(headers) + body.decode() for headers, body in sent.requests]
        for state in ("pending", "failing", "delivered"):
            call(
                "GET", f"{API}/webhook-deliveries", headers=auth["admin"], params={"status": state}
            )
        # the console's pages: every list and every attempt page, signed in as an admin
        signed_in = sign_in(client, admin_token)
        assert signed_in.status_code == 303, signed_in.text
        call.texts.append(signed_in.text)
        console_pages = [
            "/console",
            *[
                f"/console/attempts?status={state}"
                for state in (
                    "queued",
                    "executing",
                    "succeeded",
                    "failed_safe",
                    "outcome_unknown",
                    "manually_resolved",
                )
            ],
            *[f"/console/attempts/{a}" for a in attempts.values()],
            *[
                f"/console/inbox?actor_id=alice&status={state}"
                for state in ("presented", "claimed", "declined", "canceled", "expired")
            ],
            *[f"/console/webhooks?status={state}" for state in ("pending", "failing", "delivered")],
        ]
        for page in console_pages:
            shown_page = call("GET", page)
            assert shown_page.status_code == 200, (page, shown_page.status_code)
            assert "<html" in shown_page.text
        scraped = call("GET", "/metrics", headers=auth["metrics"])
        assert scraped.status_code == 200 and "ledger_approvals_total" in scraped.text
        outputs.append(scraped.text)
        outputs += call.texts

    # views, audits (function, picture, CLI), a rebuild check, metrics
    with ledger.store.recorder.datastore.transaction(commit=False) as cursor:  # type: ignore[attr-defined]
        cursor.execute("SELECT * FROM ledger_views")
        outputs += [json.dumps(dict(row)) for row in cursor.fetchall()]
        # lookup items (token hashes, Idempotency-Key records): hashes and ids only
        cursor.execute("SELECT * FROM ledger_lookups")
        outputs += [json.dumps(dict(row)) for row in cursor.fetchall()]
    for attempt_id in attempts.values():
        audit = audit_attempt(ledger.store, ledger.views, attempt_id)
        outputs.append(json.dumps(audit))
        outputs.append(mermaid_state_diagram(audit["attempt"]["events"]))
    outputs.append(ledger.metrics.render())
    db = settings.sqlite_path
    for attempt_id in attempts.values():
        for args in (
            ["audit", attempt_id, "--verify"],
            ["audit", attempt_id, "--json"],
            ["audit", attempt_id, "--format", "mermaid"],
        ):
            result = invoke(args, LEDGER_SQLITE_PATH=db, LEDGER_STORE="sqlite")
            outputs += [result.stdout, result.stderr]
    for args in (
        ["webhooks", "list", "--status", "delivered"],
        ["webhooks", "list", "--status", "delivered", "--json"],
    ):
        listed = invoke(args, LEDGER_SQLITE_PATH=db, LEDGER_STORE="sqlite")
        assert listed.exit_code == 0 and "whd_" in listed.stdout, listed.stderr
        outputs += [listed.stdout, listed.stderr]
    rebuilt = invoke(
        ["projections", "rebuild", "--check"], LEDGER_SQLITE_PATH=db, LEDGER_STORE="sqlite"
    )
    outputs += [rebuilt.stdout, rebuilt.stderr]

    outputs += lambda_outputs(ledger, attempts["success"])
    outputs += [
        logging.Formatter("%(name)s %(levelname)s %(message)s").format(record)
        for record in caplog.records
    ]
    outputs.append(capsys.readouterr().out)
    assert len(caplog.records) > 10, "the run logged next to nothing: capture is broken"

    planted = {
        **CANARIES,
        **{f"presentation_token_{i}": t for i, t in enumerate(ledger.tokens.issued)},  # type: ignore[attr-defined]
        **{f"bearer_{role}": token for role, token in tokens.items()},
    }
    found = {name: sum(text.count(value) for text in outputs) for name, value in planted.items()}
    assert len(ledger.tokens.issued) >= 5  # type: ignore[attr-defined]
    return {name: count for name, count in found.items() if count}


def lambda_outputs(ledger: Ledger, attempt_id: str) -> list[str]:
    """The worker Lambda on canary-laden stream records: its answers and its stdout."""
    pytest.importorskip("aws_lambda_powertools")
    from adapters.aws_lambda import worker
    from tests.support.aws_lambda import use_ledger

    state = json.dumps({"content": CANARIES["stream_record"]}).encode()
    image = {
        "pk": {"S": attempt_id},
        "sk": {"N": "1"},
        "topic": {"S": "domain.attempt:ExecutionAttempt.Queued"},
        "state": {"B": base64.b64encode(state).decode()},
    }
    records = [
        {
            "eventID": "1",
            "eventName": "INSERT",
            "eventSourceARN": "arn:aws:dynamodb:x",
            "dynamodb": {"NewImage": image, "SequenceNumber": "1", "Keys": {"pk": image["pk"]}},
        },
        {
            "eventID": "2",
            "eventName": "INSERT",
            "eventSourceARN": "arn:aws:dynamodb:x",
            "dynamodb": {
                "NewImage": {"topic": {"S": CANARIES["stream_record"]}, "state": image["state"]},
                "SequenceNumber": "2",
            },
        },
    ]

    class Context:
        function_name = "ledger-canary"
        function_version = "$LATEST"
        memory_limit_in_mb = 512
        invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:ledger-canary"
        aws_request_id = "00000000-0000-0000-0000-000000000000"

        def get_remaining_time_in_millis(self) -> int:
            return 900_000

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as monkeypatch, redirect_stdout(out):
        use_ledger(monkeypatch, ledger)
        answers = [
            worker.handler({"Records": records}, Context()),
            worker.handler({"mode": "recovery"}, Context()),
        ]
    assert answers[0].get("batchItemFailures"), answers[0]  # the malformed record failed
    return [json.dumps(answers), out.getvalue()]
