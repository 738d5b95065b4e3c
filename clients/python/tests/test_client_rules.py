"""The client's rules without a server: keys, what is retried and how long it waits,
the long poll's loop and deadline, answers and errors (httpx.MockTransport)."""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from ledger_client import AsyncClient, Client, RetryPolicy
from ledger_client import _core as core
from ledger_client.errors import (
    ApprovalUnavailable,
    FieldError,
    IdempotencyKeyInUse,
    InvalidSpec,
    LedgerConnectionError,
    NoAvailableBuild,
    NotFound,
    StoreUnavailable,
    TooManyRequests,
    UnexpectedResponse,
)
from ledger_client.requests import ProposalSpec
from ledger_client.retry import Budget, retry_after_seconds
from ledger_client.spec import pick_build, sha256_digest

URL = "http://ledger.test"
SPEC = ProposalSpec(
    capability="tasks.create",
    executor_build=sha256_digest("build"),
    plugin_build=sha256_digest("plugin"),
    schema_digest=sha256_digest("schema"),
    policy_digest=sha256_digest("policy"),
    permission="tasks.write",
    effect="create",
    destination="tasks",
    content={"title": "Buy milk"},
    sources=[],
    expires_at="2030-01-01T00:00:00Z",
)
PROPOSAL = {
    "proposal_id": "prop_" + "0" * 32,
    "version": 1,
    "payload_hash": sha256_digest("p"),
    "view_hash": sha256_digest("v"),
    "preview": "Action: create",
    "status": "presented",
}


class FakeClock:
    """Monotonic seconds that move only when the client sleeps (or a handler says so)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


Handler = Callable[[httpx.Request], httpx.Response]


def scripted(*steps: httpx.Response | type[Exception]) -> tuple[Handler, list[httpx.Request]]:
    """A handler answering each request with the next step (an exception is raised)."""
    seen: list[httpx.Request] = []
    queue: Iterator[httpx.Response | type[Exception]] = iter(steps)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        step = next(queue)
        if isinstance(step, type):
            raise step("scripted failure", request=request)  # type: ignore[call-arg]
        return step

    return handle, seen


def client(handler: Handler, clock: FakeClock | None = None, **policy: float) -> Client:
    clock = clock or FakeClock()
    retry = RetryPolicy(clock=clock, random=lambda: 0.5, **policy)  # type: ignore[arg-type]
    http = httpx.Client(transport=httpx.MockTransport(handler))
    return Client(URL, token="t0ken", retry=retry, http_client=http, sleep=clock.sleep)


def refused(status: int, code: str, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"error": code, "detail": "no"}, headers=headers)


def test_every_post_carries_a_fresh_256_bit_key_reused_by_its_retries() -> None:
    handler, seen = scripted(
        httpx.ReadError, httpx.Response(201, json=PROPOSAL), httpx.Response(201, json=PROPOSAL)
    )
    with client(handler) as c:
        c.propose("alice", SPEC)
        c.propose("alice", SPEC)
    keys = [request.headers["idempotency-key"] for request in seen]
    assert keys[0] == keys[1] != keys[2]
    assert all(len(base64.urlsafe_b64decode(key + "=")) == 32 for key in keys)
    assert json.loads(seen[0].content) == {"actor_id": "alice", "spec": SPEC.to_json()}
    assert "target" not in json.loads(seen[0].content)["spec"]  # None is left out
    assert seen[0].headers["authorization"] == "Bearer t0ken"


def test_a_caller_may_bring_its_own_key() -> None:
    handler, seen = scripted(httpx.Response(201, json=PROPOSAL))
    with client(handler) as c:
        c.propose("alice", SPEC, idempotency_key="order-42")
    assert seen[0].headers["idempotency-key"] == "order-42"


def test_reads_carry_no_key_and_are_retried_after_a_reset() -> None:
    handler, seen = scripted(httpx.RemoteProtocolError, httpx.Response(200, json={"items": []}))
    with client(handler) as c:
        assert c.executors().items == []
    assert len(seen) == 2 and "idempotency-key" not in seen[0].headers


def test_a_request_that_cannot_be_sent_twice_is_retried_only_if_never_sent() -> None:
    lost = core.Call("POST", "/webhook-deliveries/whd_1/redeliver", dict, resend_safe=False)
    handler, seen = scripted(httpx.ConnectError, httpx.ReadTimeout)
    with client(handler) as c, pytest.raises(LedgerConnectionError) as raised:
        c.call(lost)
    assert len(seen) == 2  # refused connection: sent again; lost answer: given up at once
    assert raised.value.status == 0 and raised.value.code == "connection_failed"


def test_retry_after_is_honoured_in_seconds_and_as_a_date() -> None:
    when = format_datetime(datetime(2030, 1, 1, 0, 0, 7, tzinfo=UTC), usegmt=True)
    now = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": when}, now=now) == 7.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    clock = FakeClock()
    handler, seen = scripted(
        refused(503, "store_unavailable", **{"Retry-After": "3"}), PROPOSAL_OK()
    )
    with client(handler, clock) as c:
        c.propose("alice", SPEC)
    assert clock.slept == [3.0] and len(seen) == 2


def PROPOSAL_OK() -> httpx.Response:
    return httpx.Response(201, json=PROPOSAL)


def test_without_retry_after_the_backoff_is_jittered_exponential() -> None:
    clock = FakeClock()
    steps = [refused(503, "store_unavailable") for _ in range(4)] + [PROPOSAL_OK()]
    handler, _ = scripted(*steps)
    with client(handler, clock, base_delay=0.2, max_delay=1.0) as c:
        c.propose("alice", SPEC)
    # random() is 0.5: half of min(max_delay, base * 2**n)
    assert clock.slept == [0.1, 0.2, 0.4, 0.5]


def test_attempts_and_total_time_are_bounded() -> None:
    handler, seen = scripted(*[refused(503, "store_unavailable") for _ in range(3)])
    with client(handler, max_attempts=3) as c, pytest.raises(StoreUnavailable):
        c.propose("alice", SPEC)
    assert len(seen) == 3
    clock = FakeClock()
    handler, seen = scripted(refused(429, "too_many_requests", **{"Retry-After": "20"}))
    with client(handler, clock, max_elapsed=15) as c, pytest.raises(TooManyRequests) as raised:
        c.propose("alice", SPEC)
    assert raised.value.status == 429 and clock.slept == [] and len(seen) == 1
    handler, seen = scripted(refused(503, "store_unavailable", **{"Retry-After": "3600"}))
    with client(handler, clock) as c, pytest.raises(StoreUnavailable):
        c.propose("alice", SPEC)  # longer than max_retry_after: not waited for
    assert clock.slept == [] and len(seen) == 1


def test_a_key_in_use_is_retried_with_the_same_key() -> None:
    handler, seen = scripted(refused(409, "idempotency_key_in_use"), PROPOSAL_OK())
    with client(handler) as c:
        c.propose("alice", SPEC)
    assert seen[0].headers["idempotency-key"] == seen[1].headers["idempotency-key"]
    handler, seen = scripted(*[refused(409, "idempotency_key_in_use") for _ in range(5)])
    with client(handler) as c, pytest.raises(IdempotencyKeyInUse):
        c.propose("alice", SPEC)


def test_a_refusal_is_not_retried_and_raises_its_class() -> None:
    handler, seen = scripted(refused(404, "approval_unavailable"))
    with client(handler) as c, pytest.raises(ApprovalUnavailable) as raised:
        c.approve("tok")
    assert len(seen) == 1
    assert (raised.value.status, raised.value.code, raised.value.detail) == (
        404,
        "approval_unavailable",
        "no",
    )


def attempt(status: str) -> dict[str, object]:
    return {
        "attempt_id": "att_1",
        "proposal_id": "prop_1",
        "proposal_version": 1,
        "status": status,
        "revision": 2,
        "delivery_mode": "provider_idempotency",
        "created_at": "2030-01-01T00:00:00Z",
        "updated_at": "2030-01-01T00:00:00Z",
        "lease_generation": 1,
    }


def test_wait_long_polls_until_the_attempt_settles() -> None:
    clock = FakeClock()
    waits: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        waits.append(request.url.params["wait"])
        clock.now += float(request.url.params["wait"])  # the server held it that long
        return httpx.Response(200, json=attempt("succeeded" if len(waits) == 3 else "executing"))

    with client(handle, clock) as c:
        answer = c.wait("att_1", timeout=100)
    assert answer.status == "succeeded" and answer.settled
    assert waits == ["30", "30", "30"]


def test_wait_ends_at_the_callers_deadline_with_the_status_then() -> None:
    clock = FakeClock()
    waits: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        waits.append(request.url.params["wait"])
        clock.now += float(request.url.params["wait"])
        return httpx.Response(200, json=attempt("queued"))

    with client(handle, clock) as c:
        answer = c.wait("att_1", timeout=45)
    assert answer.status == "queued" and not answer.settled
    assert waits == ["30", "15"]


def test_a_malformed_answer_is_an_unexpected_response() -> None:
    handler, _ = scripted(httpx.Response(200, json={"items": [{"capability": "x"}]}))
    with client(handler) as c, pytest.raises(UnexpectedResponse):
        c.executors()
    handler, _ = scripted(httpx.Response(200, text="<html>"))
    with client(handler) as c, pytest.raises(UnexpectedResponse):
        c.executors()


def test_unknown_answer_keys_are_ignored() -> None:
    handler, _ = scripted(httpx.Response(201, json={**PROPOSAL, "added_later": 1}))
    with client(handler) as c:
        assert c.propose("alice", SPEC).proposal_id == PROPOSAL["proposal_id"]


def test_pick_build_takes_the_newest_available_build_of_the_capability() -> None:
    from ledger_client.answers import ExecutorOut

    def build(char: str, available: bool, capability: str = "tasks.create") -> ExecutorOut:
        return ExecutorOut(
            capability, sha256_digest(char), "provider_idempotency", available, sha256_digest("{}")
        )

    listing = [
        build("z", True, "other"),
        build("new", False),
        build("mid", True),
        build("old", True),
    ]
    assert pick_build(listing, "tasks.create").executor_build == sha256_digest("mid")
    with pytest.raises(NoAvailableBuild, match="allows none"):
        pick_build([build("new", False)], "tasks.create")
    with pytest.raises(NoAvailableBuild, match="hosts no build"):
        pick_build(listing, "notes.append")


def test_a_spec_names_the_builds_schema_digest_unless_the_proposer_gives_its_own() -> None:
    from ledger_client.answers import ExecutorOut
    from ledger_client.spec import SpecDigests, make_spec

    build = ExecutorOut(
        "tasks.create", sha256_digest("b"), "provider_idempotency", True, sha256_digest("s")
    )
    mine = SpecDigests(sha256_digest("plugin"), sha256_digest("policy"))
    fields: dict[str, Any] = {"permission": "tasks.write", "effect": "create", "destination": "t"}
    spec = make_spec(build, {"title": "x"}, digests=mine, **fields)
    assert (spec.executor_build, spec.schema_digest) == (sha256_digest("b"), sha256_digest("s"))
    assert (spec.plugin_build, spec.policy_digest) == (mine.plugin_build, mine.policy_digest)
    pinned = SpecDigests(mine.plugin_build, mine.policy_digest, schema_digest=sha256_digest("old"))
    assert make_spec(build, {}, digests=pinned, **fields).schema_digest == sha256_digest("old")


def test_a_field_refusal_carries_every_failing_field() -> None:
    body = {
        "error": "invalid_spec",
        "detail": "2 fields",
        "errors": [
            {"pointer": "/spec/content/title", "message": "is required", "location": "body"},
            {"pointer": "/limit", "message": "at most 100", "location": "query"},
            {"pointer": 3, "message": "not the documented shape"},
        ],
        "error_count": 2,
    }
    handler, _ = scripted(httpx.Response(422, json=body))
    with client(handler) as c, pytest.raises(InvalidSpec) as raised:
        c.propose("alice", SPEC)
    assert raised.value.errors == (
        FieldError("/spec/content/title", "is required"),
        FieldError("/limit", "at most 100", "query"),
    )
    assert raised.value.error_count == 2
    handler, _ = scripted(refused(404, "not_found"))
    with client(handler) as c, pytest.raises(NotFound) as missing:
        c.get_proposal("prop_x")
    assert (missing.value.errors, missing.value.error_count) == ((), 0)


def test_the_base_url_may_be_the_root_or_the_api_prefix() -> None:
    assert Client("http://h:1/").api_url == "http://h:1/api/conversational"
    assert Client("http://h:1/api/conversational").api_url == "http://h:1/api/conversational"


def test_path_ids_are_escaped_into_one_segment() -> None:
    handler, seen = scripted(refused(404, "not_found"))
    with client(handler) as c, pytest.raises(NotFound):
        c.get_proposal("../executors")
    assert seen[0].url.raw_path == b"/api/conversational/proposals/..%2Fexecutors"


def test_the_sync_and_async_clients_have_the_same_operations() -> None:
    def operations(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(member)
            for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_") and name not in {"close", "aclose"}
        }

    sync, aio = operations(Client), operations(AsyncClient)
    assert set(sync) == set(aio)
    for name, signature in sync.items():
        assert list(signature.parameters) == list(aio[name].parameters), name
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name


def test_the_async_client_retries_with_the_same_key() -> None:
    handler, seen = scripted(httpx.ReadError, PROPOSAL_OK())
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    async def run() -> str:
        http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        async with AsyncClient(URL, token="t", http_client=http, sleep=record) as c:
            answer = await c.propose("alice", SPEC)
        await http.aclose()
        return answer.proposal_id

    assert asyncio.run(run()) == PROPOSAL["proposal_id"]
    assert seen[0].headers["idempotency-key"] == seen[1].headers["idempotency-key"]
    assert len(slept) == 1


def test_a_budget_gives_up_when_the_next_wait_would_pass_the_total_time() -> None:
    clock = FakeClock()
    budget = Budget(RetryPolicy(max_elapsed=10, clock=clock))
    assert budget.next_delay(4.0) == 4.0
    clock.now = 8.0
    assert budget.next_delay(4.0) is None


def test_a_token_function_is_asked_on_every_try() -> None:
    tokens = iter(["first", "refreshed"])
    handler, seen = scripted(
        refused(503, "store_unavailable"), httpx.Response(200, json={"items": []})
    )
    clock = FakeClock()
    http = httpx.Client(transport=httpx.MockTransport(handler))
    retry = RetryPolicy(clock=clock, random=lambda: 0.5)
    with Client(
        URL, token=lambda: next(tokens), retry=retry, http_client=http, sleep=clock.sleep
    ) as c:
        c.executors()
    assert [r.headers["authorization"] for r in seen] == ["Bearer first", "Bearer refreshed"]


def test_present_takes_a_provenance_or_the_three_bindings_never_both() -> None:
    from ledger_client import Provenance

    alice = Provenance("alice", "ib-alice", "cb-kitchen", "conv-42")
    answer = {"presentation_id": "pres_1", "token": "tok", "expires_at": "2030-01-01T00:00:00Z"}
    handler, seen = scripted(httpx.Response(201, json=answer), httpx.Response(201, json=answer))
    with client(handler) as c:
        c.present("prop_1", alice, version=1)
        c.present("prop_1", version=1, **{k: v for k, v in vars(alice).items() if k != "actor_id"})
        with pytest.raises(TypeError, match="not both"):
            c.present("prop_1", alice, version=1, conversation_key="conv-9")
        with pytest.raises(TypeError, match="give to="):
            c.present("prop_1", version=1, identity_binding_id="ib-alice")
    bodies = [json.loads(request.content) for request in seen]
    assert (
        bodies[0]
        == bodies[1]
        == {
            "version": 1,
            "identity_binding_id": "ib-alice",
            "channel_binding_id": "cb-kitchen",
            "conversation_key": "conv-42",
        }
    )
