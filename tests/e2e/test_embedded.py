"""The in-process API (``api.embedded``) behaves as the HTTP API: the same request
has the same effect and the same record whichever way it came, with the same
error codes, metrics and read-your-writes, on one ledger served both ways."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.settings import SettingsError
from api.embedded import EmbeddedLedger, LedgerError, Principal, Provenance, Role, open_ledger
from domain.errors import ApprovalUnavailable, Forbidden, InvalidInput, NotFound
from tests.support.http_helpers import (
    API,
    PROVENANCE,
    Headers,
    assert_error,
    propose_and_present,
    run_worker,
    spec,
)

pytestmark = pytest.mark.usefixtures("directory")
SUBJECT = "assistant-backend"  # the proposer the HTTP helpers sign as


@pytest.fixture
def embedded(ledger: Ledger) -> EmbeddedLedger:
    """The in-process API on the very ledger the HTTP app serves (no loops started)."""
    return EmbeddedLedger(ledger, subject=SUBJECT, start=False)


def present(embedded: EmbeddedLedger, proposal_id: str) -> str:
    return embedded.present(
        proposal_id,
        version=1,
        identity_binding_id=PROVENANCE.identity_binding_id,
        channel_binding_id=PROVENANCE.channel_binding_id,
        conversation_key=PROVENANCE.conversation_key,
    ).token


def approvals_counted(ledger: Ledger, result: str) -> float:
    for line in ledger.metrics.render().splitlines():
        if line.startswith(f'ledger_approvals_total{{result="{result}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_an_idempotency_key_used_in_process_gets_the_first_answer_over_http(
    client: TestClient, bearer: Callable[..., Headers], embedded: EmbeddedLedger
) -> None:
    body = {"actor_id": PROVENANCE.actor_id, "spec": spec()}
    first = embedded.propose(PROVENANCE.actor_id, spec(), idempotency_key="retry-1")
    proposer = {**bearer("proposer", subject=SUBJECT), "Idempotency-Key": "retry-1"}
    again = client.post(f"{API}/proposals", json=body, headers=proposer)
    assert again.status_code == 201, again.text
    assert again.json() == first.model_dump(exclude_none=True)
    # and the reverse: a key first used over HTTP answers the in-process retry
    presented = client.post(
        f"{API}/proposals/{first.proposal_id}/presentations",
        headers={**bearer("proposer", subject=SUBJECT), "Idempotency-Key": "show-1"},
        json={
            "version": 1,
            "identity_binding_id": PROVENANCE.identity_binding_id,
            "channel_binding_id": PROVENANCE.channel_binding_id,
            "conversation_key": PROVENANCE.conversation_key,
        },
    )
    assert presented.status_code == 201, presented.text
    retried = embedded.present(
        first.proposal_id,
        version=1,
        identity_binding_id=PROVENANCE.identity_binding_id,
        channel_binding_id=PROVENANCE.channel_binding_id,
        conversation_key=PROVENANCE.conversation_key,
        idempotency_key="show-1",
    )
    assert retried.model_dump() == presented.json()  # the same token, derived again
    # another body with the same key: the same uniform refusal both ways
    changed = spec(content={"title": "Buy bread"})
    with pytest.raises(LedgerError) as refused:
        embedded.propose(PROVENANCE.actor_id, changed, idempotency_key="retry-1")
    assert refused.value.code == "idempotency_key_refused"
    assert_error(
        client.post(
            f"{API}/proposals",
            json={"actor_id": PROVENANCE.actor_id, "spec": changed},
            headers=proposer,
        ),
        422,
        "idempotency_key_refused",
    )


def test_approving_in_process_counts_refreshes_the_inbox_and_converges_with_http(
    client: TestClient, bearer: Callable[..., Headers], embedded: EmbeddedLedger, ledger: Ledger
) -> None:
    token = propose_and_present(client, bearer)
    inbox = embedded.inbox(PROVENANCE.actor_id)
    assert len(inbox.items) == 1
    approved = embedded.approve(token, provenance=PROVENANCE)
    assert approved.status == "execution_pending"
    assert approvals_counted(ledger, "accepted") == 1
    assert embedded.inbox(PROVENANCE.actor_id).items == []  # read-your-writes, as over HTTP
    over_http = client.post(f"{API}/approvals", json={"token": token}, headers=bearer("channel"))
    assert over_http.status_code == 202
    assert over_http.json() == approved.model_dump(exclude_none=True)  # the same answer
    assert approvals_counted(ledger, "accepted") == 2

    with pytest.raises(ApprovalUnavailable) as denied:
        embedded.approve("not-a-real-token", provenance=PROVENANCE)
    assert denied.value.code == "approval_unavailable"
    assert denied.value.detail == over_http_refusal(client, bearer)
    assert approvals_counted(ledger, "refused") == 2


def over_http_refusal(client: TestClient, bearer: Callable[..., Headers]) -> str:
    answer = client.post(
        f"{API}/approvals", json={"token": "not-a-real-token"}, headers=bearer("channel")
    )
    assert_error(answer, 404, "approval_unavailable")
    detail: str = answer.json()["detail"]
    return detail


def test_the_same_request_leaves_the_same_record_either_way(
    client: TestClient, bearer: Callable[..., Headers], embedded: EmbeddedLedger, ledger: Ledger
) -> None:
    by_http = client.post(
        f"{API}/approvals",
        json={"token": propose_and_present(client, bearer)},
        headers=bearer("channel"),
    ).json()["attempt_id"]
    proposal = embedded.propose(PROVENANCE.actor_id, spec())
    in_process = embedded.approve(present(embedded, proposal.proposal_id), provenance=PROVENANCE)
    for attempt_id in (by_http, in_process.attempt_id):
        assert run_worker(ledger, attempt_id) == "succeeded"

    def shape(attempt_id: str) -> list[tuple[str, list[str]]]:
        events = embedded.events(attempt_id)
        assert events.verified
        return [(e.type, sorted(e.data)) for e in events.events]

    assert shape(by_http) == shape(in_process.attempt_id)
    for attempt_id in (by_http, in_process.attempt_id):
        http_view = client.get(f"{API}/execution-attempts/{attempt_id}", headers=bearer("admin"))
        assert http_view.json() == embedded.status(attempt_id).model_dump(mode="json")


def test_errors_are_the_domain_errors_whose_codes_http_returns(
    client: TestClient, bearer: Callable[..., Headers], embedded: EmbeddedLedger
) -> None:
    with pytest.raises(InvalidInput) as bad:
        embedded.propose(PROVENANCE.actor_id, {**spec(), "surprise": 1})
    assert bad.value.code == "invalid_input"
    assert bad.value.detail == "unknown field /spec/surprise is not permitted"
    answer = client.post(
        f"{API}/proposals",
        json={"actor_id": PROVENANCE.actor_id, "spec": {**spec(), "surprise": 1}},
        headers=bearer("proposer"),
    )
    assert_error(answer, 422, "invalid_input")
    # the same problems, whichever way the request came
    assert answer.json()["errors"] == [
        {"pointer": p.pointer, "message": p.message, "location": p.location}
        for p in bad.value.problems
    ]
    with pytest.raises(NotFound):
        embedded.status("att_" + "0" * 64)
    with pytest.raises(NotFound):
        embedded.status("../../etc/passwd")
    with pytest.raises(InvalidInput):
        embedded.attempts("bogus")
    with pytest.raises(InvalidInput):
        embedded.approve("token")  # no provenance: who approves is never guessed


def test_a_view_acting_as_one_principal_gets_that_roles_rules(
    client: TestClient, bearer: Callable[..., Headers], embedded: EmbeddedLedger, ledger: Ledger
) -> None:
    token = propose_and_present(client, bearer)
    proposer = embedded.acting_as(Principal(subject="backend", role=Role.PROPOSER))
    with pytest.raises(Forbidden):
        proposer.approve(token)  # a proposer is not a channel
    with pytest.raises(Forbidden):
        proposer.put_actor("mallory", enabled=True)
    channel = embedded.acting_as(Principal("chat", Role.CHANNEL, PROVENANCE))
    attempt_id = channel.approve(token).attempt_id
    alice = embedded.acting_as(Principal(subject=PROVENANCE.actor_id, role=Role.ACTOR))
    bob = embedded.acting_as(Principal(subject="bob", role=Role.ACTOR))
    assert alice.status(attempt_id).attempt_id == attempt_id
    with pytest.raises(NotFound):
        bob.status(attempt_id)  # the same answer as for a missing id
    assert_error(
        client.get(
            f"{API}/execution-attempts/{attempt_id}", headers=bearer("actor", subject="bob")
        ),
        404,
        "not_found",
    )
    with pytest.raises(InvalidInput):
        channel.approve(token, provenance=Provenance("bob", "ib-bob", "cb-bob", "C9"))


def test_wait_returns_as_soon_as_the_worker_settles_the_attempt(
    client: TestClient, bearer: Callable[..., Headers], embedded: EmbeddedLedger, ledger: Ledger
) -> None:
    token = propose_and_present(client, bearer)
    attempt_id = embedded.approve(token, provenance=PROVENANCE).attempt_id
    assert embedded.wait(attempt_id, timeout=0.01).status == "queued"  # nothing ran it
    worker = threading.Thread(target=run_worker, args=(ledger, attempt_id))
    worker.start()
    settled = embedded.wait(attempt_id, timeout=30)  # a missed wake-up would answer "queued"
    worker.join()
    assert settled.status == "succeeded"
    with pytest.raises(InvalidInput):
        embedded.wait(attempt_id, timeout=0)


def test_open_ledger_runs_the_loops_inside_the_block_only(tmp_path: Path) -> None:
    ledger = open_ledger(store="sqlite", path=tmp_path / "l.db", env="test")
    assert not ledger.running
    with ledger:
        assert ledger.running
        assert ledger.wiring.settings.sqlite_path == str(tmp_path / "l.db")
    assert not ledger.running
    with open_ledger(store="memory", start=False) as idle:
        assert not idle.running
        idle.start()
        idle.start()  # once only
        assert idle.running
        idle.stop()
        assert not idle.running


def test_bad_settings_fail_in_one_line_naming_them() -> None:
    with pytest.raises(SettingsError, match="LEDGER_STORE"):
        open_ledger(store="postgres")
    with pytest.raises(SettingsError, match="LEDGER_LEASE_SECONDS"):
        open_ledger(store="memory", lease_seconds=1)


def test_many_blocking_waiters_are_all_woken_and_none_is_left_registered(
    client: TestClient, bearer: Callable[..., Headers], embedded: EmbeddedLedger, ledger: Ledger
) -> None:
    from adapters.view_changes import ViewChanges

    changes = ledger.views.changes  # type: ignore[attr-defined]
    assert isinstance(changes, ViewChanges)
    for _ in range(3):  # repeated: a lost wake-up would answer "queued" after 30 s
        token = propose_and_present(client, bearer)
        attempt_id = embedded.approve(token, provenance=PROVENANCE).attempt_id
        answers: list[str] = []

        def wait_for(attempt_id: str, answers: list[str]) -> None:
            answers.append(embedded.wait(attempt_id, timeout=30).status)

        threads = [threading.Thread(target=wait_for, args=(attempt_id, answers)) for _ in range(20)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while changes.waiting() < 20:  # every waiter registered before the worker writes
            assert time.monotonic() < deadline, "the waiters never registered"
            time.sleep(0.005)
        run_worker(ledger, attempt_id)
        for thread in threads:
            thread.join(60)
        assert answers == ["succeeded"] * 20
        assert changes.waiting() == 0
