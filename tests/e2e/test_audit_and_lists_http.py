"""Lists, audit (JSON and Mermaid), the audit CLI, and redaction canaries."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.settings import load_settings
from tests.support.cli import invoke
from tests.support.http_helpers import API, Headers, assert_error, propose_and_present, run_worker

CANARY = "sk_live_CANARY0123456789abcdef"


def approved(client: TestClient, bearer: Callable[..., Headers], **spec: object) -> str:
    token = propose_and_present(client, bearer, **spec)
    response = client.post(f"{API}/approvals", json={"token": token}, headers=bearer("channel"))
    assert response.status_code == 202, response.text
    attempt_id: str = response.json()["attempt_id"]
    return attempt_id


def operator_only() -> dict[str, object]:
    from adapters.executors.fake import fake_build_digest

    return {
        "capability": "fake.operator_only",
        "executor_build": fake_build_digest("fake.operator_only"),
    }


@pytest.mark.usefixtures("directory")
def test_attention_list_pages_through_outcome_unknown(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    ids = [
        approved(
            client, bearer, content={"n": i, "simulate": "timeout_after_effect"}, **operator_only()
        )
        for i in range(5)
    ]
    for attempt_id in ids:
        assert run_worker(ledger, attempt_id) == "outcome_unknown"
    admin = bearer("admin")
    seen, cursor = [], None
    while True:
        params: dict[str, object] = {"status": "outcome_unknown", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = client.get(f"{API}/execution-attempts", params=params, headers=admin)
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["items"]) <= 2
        seen += [item["attempt_id"] for item in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    for role in ("actor", "channel", "proposer"):
        assert_error(
            client.get(
                f"{API}/execution-attempts", params={"status": "queued"}, headers=bearer(role)
            ),
            403,
            "forbidden",
        )
    assert_error(
        client.get(f"{API}/execution-attempts", params={"status": "bogus"}, headers=admin),
        422,
        "invalid_input",
    )
    assert_error(
        client.get(
            f"{API}/execution-attempts", params={"status": "queued", "cursor": "%%%"}, headers=admin
        ),
        422,
        "invalid_input",
    )


@pytest.mark.usefixtures("directory")
def test_events_are_redacted_verified_and_drawable(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    attempt_id = approved(client, bearer, content={"note": CANARY, "simulate": "unsafe_receipt"})
    assert run_worker(ledger, attempt_id) == "outcome_unknown"
    admin = bearer("admin")
    events = client.get(f"{API}/execution-attempts/{attempt_id}/events", headers=admin)
    assert events.status_code == 200, events.text
    body = events.json()
    assert body["verified"] is True and body["first_bad_version"] is None
    assert [e["type"] for e in body["events"]] == [
        "Queued",
        "Leased",
        "DispatchStarted",
        "ResultRecorded",
    ]
    assert "idk_" not in events.text and "canary" not in events.text.lower()
    picture = client.get(
        f"{API}/execution-attempts/{attempt_id}/events", params={"format": "mermaid"}, headers=admin
    )
    assert picture.status_code == 200
    assert picture.text.startswith("stateDiagram-v2\n")
    assert "queued --> executing" in picture.text
    assert "executing --> outcome_unknown" in picture.text
    assert_error(
        client.get(
            f"{API}/execution-attempts/{attempt_id}/events",
            headers=bearer("actor", subject="alice"),
        ),
        403,
        "forbidden",
    )
    assert_error(
        client.get(f"{API}/execution-attempts/att_{'0' * 64}/events", headers=admin),
        404,
        "not_found",
    )


@pytest.mark.usefixtures("directory")
def test_canaries_never_leave_through_any_view(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    """Canaries in spec content, the opaque token and a provider receipt."""
    token = propose_and_present(
        client, bearer, content={"secret": CANARY, "simulate": "unsafe_receipt"}
    )
    approval = client.post(f"{API}/approvals", json={"token": token}, headers=bearer("channel"))
    attempt_id = approval.json()["attempt_id"]
    run_worker(ledger, attempt_id)
    admin = bearer("admin")
    outputs = [
        approval.text,
        client.get(f"{API}/execution-attempts/{attempt_id}", headers=admin).text,
        client.get(
            f"{API}/execution-attempts", params={"status": "outcome_unknown"}, headers=admin
        ).text,
        client.get(f"{API}/execution-attempts/{attempt_id}/events", headers=admin).text,
        client.get(
            f"{API}/execution-attempts/{attempt_id}/events",
            params={"format": "mermaid"},
            headers=admin,
        ).text,
    ]
    from projections.audit import audit_attempt

    outputs.append(json.dumps(audit_attempt(ledger.store, ledger.views, attempt_id)))
    for text in outputs:
        assert CANARY not in text
        assert "sk_live_canary_do_not_store" not in text  # the fake's unsafe receipt value
        assert token not in text


def test_audit_cli_verifies_and_names_the_first_bad_version(tmp_path: Path) -> None:
    from tests.support.raw_views import read_rows, replace_rows

    db = str(tmp_path / "ledger.db")
    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=db))
    from tests.support.worlds.execution import ExecutionWorld

    world = ExecutionWorld(ledger.store, registry=ledger.registry, effects=ledger.effects)
    attempt_id = world.approved("provider_idempotency")
    world.worker().process(attempt_id)
    ledger.projector.project_attempt(attempt_id)
    ledger.close()

    ok = invoke(["audit", attempt_id, "--verify"], LEDGER_SQLITE_PATH=db, COLUMNS="1000")
    assert ok.exit_code == 0, ok.stderr
    assert "all chains verified" in ok.stdout
    # redacted values read [redacted], never swallowed as console markup
    assert "idempotency_key=[redacted]," in ok.stdout
    assert "'content': '[redacted]'" in ok.stdout
    assert "idempotency_key=," not in ok.stdout
    as_json = json.loads(invoke(["audit", attempt_id, "--json"], LEDGER_SQLITE_PATH=db).stdout)
    assert as_json["verified"] is True
    assert {c["stream_id"].split(":")[0] for c in as_json["context"]} >= {
        "actor",
        "identity-binding",
        "channel-binding",
        "grant",
        "executor-build",
    }
    picture = invoke(["audit", attempt_id, "--format", "mermaid"], LEDGER_SQLITE_PATH=db)
    assert picture.stdout.startswith("stateDiagram-v2")

    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=db))
    rows = read_rows(ledger.store, attempt_id)
    version, topic, state = rows[1]
    rows[1] = (version, topic, state.replace(b'"generation":1', b'"generation":7'))
    replace_rows(ledger.store, attempt_id, rows)
    ledger.close()
    broken = invoke(["audit", attempt_id, "--verify"], LEDGER_SQLITE_PATH=db)
    assert broken.exit_code == 1
    assert f"{attempt_id} version 3 (broken_link)" in broken.stderr
    missing = invoke(["audit", "att_missing"], LEDGER_SQLITE_PATH=db)
    assert missing.exit_code == 1 and "not_found" in missing.stderr


@pytest.mark.usefixtures("directory")
def test_an_effect_after_no_effect_is_on_the_attention_list(
    client: TestClient, bearer: Callable[..., Headers], ledger: Ledger
) -> None:
    """Issue 14.1: a success observed after a "no effect" resolution is listed by its
    own status, shown in the status view and drawn in the audit; an admin settles it."""
    from domain.attempt import ExecutionAttempt
    from domain.ports import Commit

    attempt_id = approved(
        client, bearer, content={"simulate": "timeout_after_effect"}, **operator_only()
    )
    assert run_worker(ledger, attempt_id) == "outcome_unknown"
    admin = bearer("admin")
    url = f"{API}/execution-attempts/{attempt_id}"
    revision = client.get(url, headers=admin).json()["revision"]
    resolved = client.post(
        f"{url}/resolve",
        headers=admin,
        json={
            "expected_revision": revision,
            "resolution": "no_effect",
            "reason": "nothing in the provider console",
        },
    )
    assert resolved.status_code == 200, resolved.text
    # the abandoned call answers after all: what the worker's late-answer callback does
    attempt = ledger.store.get(ExecutionAttempt, attempt_id)
    assert attempt is not None
    attempt.observe_late_result(
        generation=attempt.lease_generation, kind="succeeded", now=ledger.clock.now()
    )
    ledger.store.commit(Commit(aggregates=[attempt]))
    ledger.projector.project_attempt(attempt_id)

    view = client.get(url, headers=admin).json()
    assert view["status"] == "effect_after_no_effect"
    listed = client.get(
        f"{API}/execution-attempts", headers=admin, params={"status": "effect_after_no_effect"}
    ).json()["items"]
    assert [item["attempt_id"] for item in listed] == [attempt_id]
    drawn = client.get(f"{url}/events", params={"format": "mermaid"}, headers=admin).text
    assert "--> effect_after_no_effect" in drawn
    settled = client.post(
        f"{url}/resolve",
        headers=admin,
        json={
            "expected_revision": view["revision"],
            "resolution": "effect_applied",
            "reason": "the provider shows the task after all",
        },
    )
    assert settled.status_code == 200, settled.text
    assert settled.json()["status"] == "manually_resolved"
