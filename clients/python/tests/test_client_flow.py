"""The Python client against a real `ledger serve`, on SQLite and on the emulator:
the whole flow (sync and async), retries that never make a second proposal, and
Retry-After honoured on 503 and 429."""

from __future__ import annotations

import asyncio
import json

import pytest
from fault_proxy import FaultProxy
from ledger_servers import FAKE, Actor, LedgerServer, proposal_streams, spec_args

from ledger_client import AsyncClient, Client, RetryPolicy
from ledger_client.errors import StoreUnavailable, TooManyRequests


def test_the_whole_flow_from_executors_to_a_verified_webhook(
    ledger_server: LedgerServer, actor: Actor
) -> None:
    with (
        Client(ledger_server.url, token=ledger_server.token("proposer")) as assistant,
        Client(ledger_server.url, token=actor.channel_token) as channel,
    ):
        listing = assistant.executors()
        newest = next(i for i in listing.items if i.capability == FAKE)
        spec = assistant.build_spec(FAKE, **spec_args())
        assert spec.executor_build == newest.executor_build and newest.available
        proposal = assistant.propose(actor.provenance.actor_id, spec)
        assert proposal.status == "presented" and proposal.version == 1
        shown = assistant.present(proposal, **actor.binding)
        assert shown.token and shown.presentation_id.startswith("pres_")
        inbox = channel.inbox(actor.provenance.actor_id)
        assert [item.proposal_id for item in inbox.items] == [proposal.proposal_id]
        approval = channel.approve(shown.token)
        assert approval.status == "execution_pending"
        assert channel.approve(shown.token).attempt_id == approval.attempt_id  # the stored one
        result = channel.wait(approval, timeout=30)
        assert result.status == "succeeded" and result.settled, result
        assert result.result is not None and result.result.receipt
        view = assistant.get_proposal(proposal.proposal_id)
        assert view.versions[0].attempt_id == approval.attempt_id
    event = ledger_server.receiver.wait_for(approval.attempt_id)
    assert event["type"] == "attempt.succeeded" and event["status"] == "succeeded"


def test_the_async_client_runs_the_same_flow(ledger_server: LedgerServer, actor: Actor) -> None:
    async def flow() -> tuple[str, str]:
        async with (
            AsyncClient(ledger_server.url, token=ledger_server.token("proposer")) as assistant,
            AsyncClient(ledger_server.url, token=actor.channel_token) as channel,
        ):
            spec = await assistant.build_spec(FAKE, **spec_args())
            proposal = await assistant.propose(actor.provenance.actor_id, spec)
            shown = await assistant.present(proposal, **actor.binding)
            second = await assistant.propose(actor.provenance.actor_id, spec)
            declined = await channel.decline(
                (await assistant.present(second, **actor.binding)).token
            )
            attempt = await channel.wait(await channel.approve(shown.token), timeout=30)
            return attempt.status, declined.status

    assert asyncio.run(flow()) == ("succeeded", "declined")


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_lost_answer_is_retried_with_the_same_key_and_makes_one_proposal(
    ledger_server: LedgerServer, actor: Actor, proxy: FaultProxy, slept: list[float], flavour: str
) -> None:
    before = proposal_streams(ledger_server)
    proxy.drop("POST", "/api/conversational/proposals")
    token = ledger_server.token("proposer")
    with Client(ledger_server.url, token=token) as plain:
        spec = plain.build_spec(FAKE, **spec_args(content={"title": f"lost {flavour}"}))
    if flavour == "sync":
        with Client(proxy.url, token=token, sleep=slept.append) as assistant:
            proposal = assistant.propose(actor.provenance.actor_id, spec)
    else:

        async def record(seconds: float) -> None:
            slept.append(seconds)

        async def propose() -> str:
            async with AsyncClient(proxy.url, token=token, sleep=record) as assistant:
                return (await assistant.propose(actor.provenance.actor_id, spec)).proposal_id

        proposal_id = asyncio.run(propose())
    posts = [s for s in proxy.seen if s.method == "POST"]
    assert [s.action for s in posts] == ["drop", "forwarded"]  # the server answered both
    assert posts[0].idempotency_key and posts[0].idempotency_key == posts[1].idempotency_key
    assert len(slept) == 1  # one backoff between the tries
    first, retried = (json.loads(s.answer)["proposal_id"] for s in posts)
    assert first == retried == (proposal.proposal_id if flavour == "sync" else proposal_id)
    assert proposal_streams(ledger_server) - before == 1  # exactly one proposal exists


def test_a_lost_presentation_answer_gets_the_token_again(
    ledger_server: LedgerServer, actor: Actor, proxy: FaultProxy, slept: list[float]
) -> None:
    with Client(proxy.url, token=ledger_server.token("proposer"), sleep=slept.append) as c:
        proposal = c.propose(actor.provenance.actor_id, c.build_spec(FAKE, **spec_args()))
        proxy.drop("POST", f"/api/conversational/proposals/{proposal.proposal_id}/presentations")
        shown = c.present(proposal, **actor.binding)
    with Client(ledger_server.url, token=actor.channel_token) as channel:
        assert channel.approve(shown.token).status == "execution_pending"
    view_answers = [s for s in proxy.seen if s.path.endswith("/presentations")]
    assert [s.action for s in view_answers] == ["drop", "forwarded"]
    assert json.loads(view_answers[0].answer)["token"] == shown.token


@pytest.mark.parametrize("status", [503, 429])
def test_a_refusal_with_retry_after_is_waited_out_and_retried(
    ledger_server: LedgerServer, proxy: FaultProxy, slept: list[float], status: int
) -> None:
    proxy.refuse("GET", "/api/conversational/executors", status, retry_after="2")
    with Client(proxy.url, token=ledger_server.token("proposer"), sleep=slept.append) as c:
        listing = c.executors()
    assert any(item.capability == FAKE for item in listing.items)
    assert slept == [2.0]
    assert [s.action for s in proxy.seen] == ["refuse", "forwarded"]


@pytest.mark.parametrize(("status", "error"), [(503, StoreUnavailable), (429, TooManyRequests)])
def test_retries_are_bounded_and_the_last_refusal_is_raised(
    ledger_server: LedgerServer,
    proxy: FaultProxy,
    slept: list[float],
    status: int,
    error: type[Exception],
) -> None:
    for _ in range(3):
        proxy.refuse("POST", "/api/conversational/proposals", status, retry_after="1")
    policy = RetryPolicy(max_attempts=3)
    token = ledger_server.token("proposer")
    with Client(proxy.url, token=token, retry=policy, sleep=slept.append) as c:
        spec = c.build_spec(FAKE, **spec_args())
        with pytest.raises(error) as raised:
            c.propose("alice", spec)
    assert raised.value.status == status
    assert slept == [1.0, 1.0]
    refused = [s for s in proxy.seen if s.method == "POST"]
    assert len(refused) == 3 and len({s.idempotency_key for s in refused}) == 1
