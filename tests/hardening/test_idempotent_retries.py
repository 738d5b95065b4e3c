"""Idempotency-Key on POST /proposals, .../presentations and .../cancel.

Semantics (memory store): the same key and body get the first answer and
status; another body or a key over 255 characters get the one uniform refusal;
another caller's key is that caller's own (keys are namespaced per caller); a
duplicate while the first is in flight gets 409.

Lost answers (ministack, ``dynamodb`` marker): the request is applied and its
answer is lost, either on the way to the HTTP client (the client drops it) or
on the way back from DynamoDB (the server cannot know whether it committed and
answers 503). The client retries with the same key: one proposal, one
presentation, one cancel. Without a key the same retry makes a second proposal,
which is what the key is for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger, build_ledger
from adapters.dynamodb.client import Retrier
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder
from adapters.settings import Settings, load_settings
from adapters.system import SecretsTokenSource
from api.http.app import create_app
from api.http.auth import mint_token
from domain.timeutil import format_utc
from tests.support.clocks import FixedClock
from tests.support.faults import LOST_RESPONSE, ScriptedFaultClient
from tests.support.http_helpers import API, DIRECTORY, PROVENANCE, Headers, directory_puts, spec

PRESENT = {
    "version": 1,
    "identity_binding_id": PROVENANCE.identity_binding_id,
    "channel_binding_id": PROVENANCE.channel_binding_id,
    "conversation_key": PROVENANCE.conversation_key,
}


class CountingTokens(SecretsTokenSource):
    """Real ids; remembers every one handed out, by prefix."""

    def __init__(self) -> None:
        self.ids: dict[str, list[str]] = {}

    def new_id(self, prefix: str) -> str:
        value = super().new_id(prefix)
        self.ids.setdefault(prefix, []).append(value)
        return value


class Api:
    """The app over one ledger, with role headers and stream counters."""

    def __init__(self, settings: Settings, ledger: Ledger, tokens: CountingTokens) -> None:
        self.settings = settings
        self.ledger = ledger
        self.tokens = tokens
        # the clock starts at the real time (the emulator reaps lookup items whose
        # TTL is in the real past), so the spec expires a day after it
        self.expires = format_utc(ledger.clock.now() + timedelta(days=1))
        self.client = TestClient(create_app(settings, ledger=ledger))
        for path, body in directory_puts():
            answer = self.client.put(DIRECTORY + path, json=body, headers=self.headers("admin"))
            assert answer.status_code == 200, answer.text

    def headers(
        self, role: str, subject: str = "assistant-backend", key: str | None = None
    ) -> Headers:
        extra: dict[str, Any] = {"provenance": PROVENANCE} if role == "channel" else {}
        token = mint_token(self.settings, subject=subject, role=role, **extra)
        headers = {"Authorization": f"Bearer {token}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        return headers

    def propose(self, key: str | None, subject: str = "assistant-backend", **changes: Any) -> Any:
        changes.setdefault("expires_at", self.expires)
        body = {"actor_id": PROVENANCE.actor_id, "spec": spec(**changes)}
        return self.client.post(
            f"{API}/proposals", json=body, headers=self.headers("proposer", subject, key)
        )

    def present(self, proposal_id: str, key: str | None) -> Any:
        return self.client.post(
            f"{API}/proposals/{proposal_id}/presentations",
            json=PRESENT,
            headers=self.headers("proposer", key=key),
        )

    def cancel(self, proposal_id: str, key: str | None) -> Any:
        return self.client.post(
            f"{API}/proposals/{proposal_id}/cancel",
            json={"version": 1},
            headers=self.headers("proposer", key=key),
        )

    def stored(self, prefix: str) -> list[str]:
        """Ids handed out that became streams (proposals) or presentations."""
        if prefix == "prop":
            return [i for i in self.tokens.ids.get("prop", []) if self.ledger.store.read_stream(i)]
        from domain.proposal import Proposal

        found = []
        for proposal_id in self.stored("prop"):
            proposal = self.ledger.store.get(Proposal, proposal_id)
            assert proposal is not None
            found += list(proposal.presentations)
        return found

    def events(self, proposal_id: str, name: str) -> int:
        return sum(e.topic.endswith(f".{name}") for e in self.ledger.store.read_stream(proposal_id))


@pytest.fixture
def api(hermetic_env: None) -> Iterator[Api]:
    settings = load_settings(store="memory", env="test")
    tokens = CountingTokens()
    ledger = build_ledger(settings, clock=FixedClock(), tokens=tokens)
    made = Api(settings, ledger, tokens)
    yield made
    made.client.close()
    ledger.close()


def assert_refused(answer: Any) -> None:
    assert answer.status_code == 422, answer.text
    assert answer.json() == {
        "error": "idempotency_key_refused",
        "detail": "The Idempotency-Key cannot be used for this request.",
    }


# -- semantics ---------------------------------------------------------------------


def test_the_same_key_and_body_get_the_first_answer_and_status(api: Api) -> None:
    first = api.propose("key-1")
    again = api.propose("key-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert len(api.stored("prop")) == 1


def test_a_new_version_through_the_lineage_is_made_once(api: Api) -> None:
    lineage = api.propose(None).json()["proposal_id"]
    body = {
        "actor_id": PROVENANCE.actor_id,
        "lineage_id": lineage,
        "spec": spec(content={"title": "Buy oat milk"}, expires_at=api.expires),
    }
    headers = api.headers("proposer", key="revise-1")
    answers = [api.client.post(f"{API}/proposals", json=body, headers=headers) for _ in range(3)]
    assert {a.status_code for a in answers} == {201}
    assert {a.json()["version"] for a in answers} == {2}
    assert api.events(lineage, "Revised") == 1


def test_a_retried_presentation_returns_the_same_working_token(api: Api) -> None:
    proposal_id = api.propose(None).json()["proposal_id"]
    first = api.present(proposal_id, "show-1")
    again = api.present(proposal_id, "show-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["cache-control"] == "no-store"
    assert len(api.stored("pres")) == 1
    approved = api.client.post(
        f"{API}/approvals",
        json={"token": again.json()["token"]},
        headers=api.headers("channel", "chat-backend"),
    )
    assert approved.status_code == 202, approved.text


def test_a_retried_cancel_appends_one_event(api: Api) -> None:
    proposal_id = api.propose(None).json()["proposal_id"]
    answers = [api.cancel(proposal_id, "cancel-1") for _ in range(3)]
    assert {a.status_code for a in answers} == {200}
    assert {a.json()["status"] for a in answers} == {"canceled"}
    assert api.events(proposal_id, "Canceled") == 1


def test_another_body_or_a_long_key_get_the_uniform_refusal(api: Api) -> None:
    assert api.propose("key-2").status_code == 201
    assert_refused(api.propose("key-2", content={"title": "something else"}))
    assert_refused(api.propose("k" * 256))
    assert_refused(api.propose("has a space"))
    assert api.propose("k" * 255).status_code == 201
    proposal_id = api.stored("prop")[0]
    assert_refused(api.present(proposal_id, "key-2"))  # same key, another route
    assert len(api.stored("prop")) == 2


def test_another_callers_key_is_its_own(api: Api) -> None:
    """Keys are namespaced per caller: the same key from another caller is a new
    request of that caller, neither refused nor answered with the first one."""
    first = api.propose("key-5")
    other = api.propose("key-5", subject="another-backend")
    assert first.status_code == other.status_code == 201, other.text
    assert other.json()["proposal_id"] != first.json()["proposal_id"]
    assert api.propose("key-5", subject="another-backend").json() == other.json()
    assert len(api.stored("prop")) == 2


def test_a_failed_request_leaves_no_key_behind(api: Api) -> None:
    bad = api.propose("key-3", permission="not.in.catalogue")
    assert bad.status_code == 422
    assert api.propose("key-3").status_code == 201


def test_a_duplicate_while_the_first_is_in_flight_gets_409(api: Api) -> None:
    from api.http.idempotency import idempotency_key

    registry = api.client.app.state.idempotency_in_flight  # type: ignore[attr-defined]
    body = {"actor_id": PROVENANCE.actor_id, "spec": spec(expires_at=api.expires)}

    class FakeRequest:
        method = "POST"

        class url:
            path = f"{API}/proposals"

    from api.http.auth import Caller, Role
    from api.http.schemas.proposals import ProposalIn

    key = idempotency_key(
        "key-4",
        FakeRequest(),  # type: ignore[arg-type]
        Caller("assistant-backend", Role.PROPOSER),
        ProposalIn(**body),
    )
    with registry.hold(key):
        busy = api.client.post(
            f"{API}/proposals", json=body, headers=api.headers("proposer", key="key-4")
        )
    assert busy.status_code == 409
    assert busy.json()["error"] == "idempotency_key_in_use"
    assert api.stored("prop") == []
    done = api.client.post(
        f"{API}/proposals", json=body, headers=api.headers("proposer", key="key-4")
    )
    assert done.status_code == 201


def test_only_hashes_of_a_key_are_stored(api: Api) -> None:
    key = "secret-shaped-key-6c1f0e"
    created = api.propose(key).json()
    token = api.present(created["proposal_id"], key + "-p").json()["token"]
    recorder = api.ledger.store.recorder
    dumped = repr(vars(recorder))
    assert key not in dumped and token not in dumped


# -- lost answers on ministack ------------------------------------------------------


@pytest.fixture
def faulty_api(
    dynamodb_client: Any, dynamodb_table_name: str, hermetic_env: None
) -> Iterator[tuple[Api, ScriptedFaultClient]]:
    """The app on ministack; DynamoDB requests get one try (an ambiguous write
    becomes a 503 for the HTTP client to retry) and can be hit by scripted faults."""
    client = ScriptedFaultClient(dynamodb_client)
    recorder = DynamoDBLedgerRecorder(
        dynamodb_table_name, client, retrier=Retrier(max_attempts=1, sleep=lambda _: None)
    )
    settings = load_settings(store="dynamodb", env="test", dynamodb_table=dynamodb_table_name)
    tokens = CountingTokens()
    ledger = build_ledger(settings, clock=FixedClock(), tokens=tokens, recorder=recorder)
    made = Api(settings, ledger, tokens)
    yield made, client
    made.client.close()


def writes(topic: str) -> Callable[[dict[str, Any]], bool]:
    def match(kwargs: dict[str, Any]) -> bool:
        items = (
            [kwargs["Item"]]
            if "Item" in kwargs
            else [a["Put"]["Item"] for a in kwargs.get("TransactItems", []) if "Put" in a]
        )
        return any(i.get("topic", {}).get("S", "").endswith(f".{topic}") for i in items)

    return match


def lose(
    api: Api, faults: ScriptedFaultClient, where: str, topic: str, send: Callable[[], Any]
) -> Any:
    """Send once with the answer lost ``where``; then retry until an answer arrives."""
    if where == "client":
        send()  # applied; the answer never reaches the caller
    else:
        faults.arm(LOST_RESPONSE, "transact_write_items", when=writes(topic))
        ambiguous = send()
        assert ambiguous.status_code == 503, ambiguous.text
        assert faults.pending == 0
    return send()


@pytest.mark.dynamodb
@pytest.mark.parametrize("where", ["client", "dynamodb"])
def test_a_retry_after_a_lost_answer_makes_one_of_each(
    faulty_api: tuple[Api, ScriptedFaultClient], where: str
) -> None:
    api, faults = faulty_api
    created = lose(api, faults, where, "Proposed", lambda: api.propose(f"p-{where}"))
    assert created.status_code == 201, created.text
    proposal_id = created.json()["proposal_id"]
    shown = lose(api, faults, where, "Presented", lambda: api.present(proposal_id, f"s-{where}"))
    assert shown.status_code == 201, shown.text
    canceled = lose(api, faults, where, "Canceled", lambda: api.cancel(proposal_id, f"c-{where}"))
    assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"

    assert api.stored("prop") == [proposal_id]
    assert len(api.stored("pres")) == 1
    assert api.events(proposal_id, "Canceled") == 1
    print(
        f"\nlost answer at {where}: proposals=1 presentations=1 cancels=1 "
        f"(ids handed out: {len(api.tokens.ids['prop'])} proposals, "
        f"{len(api.tokens.ids['pres'])} presentations)"
    )


@pytest.mark.dynamodb
def test_without_a_key_the_same_retry_makes_a_second_proposal(
    faulty_api: tuple[Api, ScriptedFaultClient],
) -> None:
    api, faults = faulty_api
    assert lose(api, faults, "client", "Proposed", lambda: api.propose(None)).status_code == 201
    assert len(api.stored("prop")) == 2
