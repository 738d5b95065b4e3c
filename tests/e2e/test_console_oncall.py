"""The console for on-call: what each attempt was, every attention state with its
form and guidance, acknowledging a failed_safe, and the recorded reveal of the
approved preview."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.executors.fake import fake_build_digest
from adapters.settings import Settings
from domain.attempt import ExecutionAttempt
from domain.oversight import reveals_id
from domain.ports import Commit
from tests.support.console import admin_session, hidden_fields
from tests.support.http_helpers import API, PROVENANCE, Headers, propose_and_present, run_worker

pytestmark = pytest.mark.usefixtures("directory")


def attempt_in(
    client: TestClient,
    bearer: Callable[..., Headers],
    ledger: Ledger,
    capability: str,
    simulate: str,
    expected: str,
) -> str:
    token = propose_and_present(
        client,
        bearer,
        capability=capability,
        executor_build=fake_build_digest(capability),
        content={"title": "Call the plumber", "simulate": simulate},
    )
    attempt_id: str = client.post(
        f"{API}/approvals", json={"token": token}, headers=bearer("channel")
    ).json()["attempt_id"]
    assert run_worker(ledger, attempt_id) == expected
    return attempt_id


def section(html: str, name: str) -> str:
    start = html.index(f'<section id="{name}">')
    return html[start : html.index("</section>", start)]


def test_the_attention_rows_and_the_page_say_what_the_attempt_was(
    browser: TestClient,
    client: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    attempt_id = attempt_in(
        client, bearer, ledger, "fake.operator_only", "timeout_after_effect", "outcome_unknown"
    )
    admin_session(browser, settings)
    row = section(browser.get("/console").text, "outcome_unknown")
    assert f"/console/attempts/{attempt_id}" in row
    for shown in ("fake.operator_only", "tasks", "task:42", PROVENANCE.actor_id):
        assert shown in row, shown
    assert PROVENANCE.channel_binding_id in row

    page = browser.get(f"/console/attempts/{attempt_id}").text
    key = ledger.store.get(ExecutionAttempt, attempt_id).idempotency_key  # type: ignore[union-attr]
    assert f'id="idempotency-key">{key}<' in page and "[redacted]" not in page.split("Events")[0]
    assert "task:42 at base revision r7" in page and "assistant-backend" in page
    assert f"{PROVENANCE.actor_id} via {PROVENANCE.identity_binding_id}" in page
    assert re.search(r"<li><span>queued</span> <time>\d{4}-", page)
    assert "dispatch started" in page and "result recorded" in page
    # an operator-only build: guidance names the key, no reconcile form, no preselected verdict
    assert f"Operator-only build (no reconciler): search the provider for key {key}" in page
    assert 'id="reconcile"' not in page and "checked" not in page.split('id="resolve"')[1]
    assert "Call the plumber" not in page  # content only behind Reveal


def test_reconcile_is_offered_only_where_a_reconciler_exists(
    browser: TestClient,
    client: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    attempt_id = attempt_in(
        client, bearer, ledger, "fake.correlation_lookup", "timeout_after_effect", "pending"
    )
    attempt = ledger.store.get(ExecutionAttempt, attempt_id)
    assert attempt is not None  # the lookup could not tell: as the worker records it
    attempt.record_unknown(
        reason_code="lookup_unknown",
        now=ledger.clock.now(),
        generation=attempt.lease_generation,
    )
    ledger.store.commit(Commit(aggregates=[attempt]))
    ledger.projector.project_attempt(attempt_id)
    admin_session(browser, settings)
    page = browser.get(f"/console/attempts/{attempt_id}").text
    assert 'id="reconcile"' in page and "read-only lookup again" in page


def test_a_failed_safe_is_acknowledged_once_and_leaves_the_list(
    browser: TestClient,
    client: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    attempt_id = attempt_in(
        client, bearer, ledger, "fake.provider_idempotency", "no_write_error", "failed_safe"
    )
    admin_session(browser, settings)
    assert attempt_id in section(browser.get("/console").text, "failed_safe")
    page = browser.get(f"/console/attempts/{attempt_id}").text
    fields = hidden_fields(page, "acknowledge")
    url = f"/console/attempts/{attempt_id}/acknowledge"
    forged = browser.post(url, data={**fields, "csrf": "x" * 43, "note": "told the team"})
    assert forged.status_code == 403
    stale = {**fields, "expected_revision": str(int(fields["expected_revision"]) - 1)}
    assert browser.post(url, data={**stale, "note": "told the team"}).status_code == 409
    done = browser.post(url, data={**fields, "note": "told the team"}, follow_redirects=False)
    assert done.status_code == 303
    after = browser.get(done.headers["location"]).text
    assert "Acknowledged: it left the attention list." in after and "told the team" in after
    assert 'id="acknowledge"' not in after
    assert attempt_id not in section(browser.get("/console").text, "failed_safe")
    events, _ = ledger.store.audit_events(attempt_id)
    acks = [e.data() for e in events if type(e).__name__ == "Acknowledged"]
    assert [(a["acknowledged_by"], a["note"]) for a in acks] == [("ops", "told the team")]
    # the status stays failed_safe, and the JSON view says who acknowledged it
    view = client.get(f"{API}/execution-attempts/{attempt_id}", headers=bearer("admin")).json()
    assert view["status"] == "failed_safe" and view["acknowledgement"]["acknowledged_by"] == "ops"


def test_effect_after_no_effect_is_on_the_list_with_its_resolve_form(
    browser: TestClient,
    client: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    attempt_id = attempt_in(
        client, bearer, ledger, "fake.provider_idempotency", "no_write_error", "failed_safe"
    )
    attempt = ledger.store.get(ExecutionAttempt, attempt_id)
    assert attempt is not None
    attempt.observe_late_result(
        generation=attempt.lease_generation, kind="succeeded", now=ledger.clock.now()
    )
    ledger.store.commit(Commit(aggregates=[attempt]))
    ledger.projector.project_attempt(attempt_id)
    admin_session(browser, settings)
    listed = browser.get("/console").text
    assert attempt_id in section(listed, "effect_after_no_effect")
    assert attempt_id not in section(listed, "failed_safe")
    page = browser.get(f"/console/attempts/{attempt_id}").text
    assert 'id="resolve"' in page and "The effect was found after the attempt" in page
    fields = hidden_fields(page, "resolve")
    done = browser.post(
        f"/console/attempts/{attempt_id}/resolve",
        data={**fields, "resolution": "effect_applied", "reason": "kept it at the provider"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert attempt_id not in browser.get("/console").text


def test_reveal_shows_the_approved_preview_and_is_recorded_first(
    browser: TestClient,
    client: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    attempt_id = attempt_in(
        client, bearer, ledger, "fake.operator_only", "timeout_after_effect", "outcome_unknown"
    )
    admin_session(browser, settings)
    page = browser.get(f"/console/attempts/{attempt_id}").text
    url = f"/console/attempts/{attempt_id}/reveal"
    forged = browser.post(url, data={"csrf": "x" * 43})
    assert forged.status_code == 403 and "Call the plumber" not in forged.text
    assert ledger.store.audit_events(reveals_id(attempt_id))[0] == []
    shown = browser.post(url, data=hidden_fields(page, "reveal"))
    assert shown.status_code == 200 and "Call the plumber" in shown.text
    assert "Destination: tasks" in shown.text and "Revealed by ops at" in shown.text
    events, bad = ledger.store.audit_events(reveals_id(attempt_id))
    revealed = [e.data() for e in events if type(e).__name__ == "PreviewRevealed"]
    assert bad is None and [(r["by"], r["attempt_id"]) for r in revealed] == [("ops", attempt_id)]
    # the page itself, reloaded, hides it again
    assert "Call the plumber" not in browser.get(f"/console/attempts/{attempt_id}").text


def test_find_filters_and_id_prefixes_and_says_what_is_wrong(
    browser: TestClient,
    client: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    unknown = attempt_in(
        client, bearer, ledger, "fake.operator_only", "timeout_after_effect", "outcome_unknown"
    )
    failed = attempt_in(
        client, bearer, ledger, "fake.provider_idempotency", "no_write_error", "failed_safe"
    )
    admin_session(browser, settings)
    everything = browser.get("/console/attempts").text
    assert failed in everything and unknown in everything  # the order: test_find_index
    only = browser.get("/console/attempts", params={"capability": "fake.operator_only"}).text
    assert unknown in only and failed not in only
    by_id = browser.get("/console/attempts", params={"id": failed[:12]}).text
    assert failed in by_id and unknown not in by_id
    by_status = browser.get("/console/attempts?status=failed_safe").text
    assert failed in by_status and unknown not in by_status
    for params, words in (
        ({"since": "yesterday"}, "since: a UTC time such as"),
        ({"id": "att_"}, "at least 6 characters"),
        ({"status": "lost"}, "status: one of"),
        ({"actor_id": "<script>"}, "actor: letters, digits"),
    ):
        answer = browser.get("/console/attempts", params=params)
        assert answer.status_code == 400 and words in answer.text, params
        assert "Traceback" not in answer.text


def test_a_rebuild_of_the_find_index_lists_attempts_projected_before_it(
    ledger: Ledger, client: TestClient, bearer: Callable[..., Headers]
) -> None:
    from adapters.rebuild import rebuild
    from api.service import find
    from api.service.principal import Principal, Role
    from projections.find import FIND_VIEW

    attempt_id = attempt_in(
        client, bearer, ledger, "fake.operator_only", "timeout_after_effect", "outcome_unknown"
    )
    admin = Principal(subject="ops", role=Role.ADMIN)
    stale = ledger.views.get_view(FIND_VIEW, f"{attempt_id}#attention")
    assert stale is not None
    # as a store written before the index existed: the attention row is not there
    ledger.views.replace_views(
        [replace_record(stale, list_pk=None, list_sk=None, version=stale.version)], force=True
    )
    assert find.attention(ledger, admin, "outcome_unknown", 20, None)[0] == []
    report = rebuild(ledger, "find")
    assert report.written >= 1 and f"{attempt_id}#attention" in report.changed
    listed, _ = find.attention(ledger, admin, "outcome_unknown", 20, None)
    assert [row["attempt_id"] for row in listed] == [attempt_id]
    assert rebuild(ledger, "find").written == 0  # nothing differs any more


def replace_record(record: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(record, **changes)
