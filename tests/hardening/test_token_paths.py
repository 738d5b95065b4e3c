"""The unknown-token paths do the same work whatever exists (proven structurally).

Wall-clock timing is noise; the work is not. A spy records every token hash
and every store call in order: an unknown approval token always costs exactly
one hash and one strongly consistent lookup, whatever its shape and whatever
records exist, and every known token starts with that same work. A bearer
token that does not verify touches the store not at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.memory.recorder import MemoryLedgerRecorder
from adapters.store import LedgerStore
from domain.errors import ApprovalUnavailable
from domain.services import approval as approval_service
from domain.services.approval import Provenance, approve
from tests.support.http_helpers import API, Headers
from tests.support.worlds.approval import World

pytestmark = pytest.mark.usefixtures("hermetic_env")

UNKNOWN_TOKENS = [
    "x" * 43,  # the shape of a real token
    "a",  # the shortest the API accepts
    "y" * 512,  # the longest
    "é" * 40,  # not ASCII
    " ",  # blank
    "0" * 64,  # looks like a stored hash
    "token#" + "1" * 64,  # looks like a lookup key
]


class SpyStore:
    """Delegates to a store; logs every call (name only) in order."""

    def __init__(self, inner: Any, log: list[str]) -> None:
        self._inner = inner
        self._log = log

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self._log.append(name)
            return target(*args, **kwargs)

        return call


def spied_world(populated: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[World, list[str]]:
    from dataclasses import replace

    world = World(LedgerStore(MemoryLedgerRecorder()))
    if populated:
        for _ in range(3):
            proposal_id = world.propose()
            for _ in range(2):
                world.present(proposal_id)
        approve(world.ctx, token=world.present(world.propose()).token, provenance=world.who)
    log: list[str] = []
    original = approval_service.token_hash

    def counted_hash(token: str) -> str:
        log.append("hash")
        return original(token)

    monkeypatch.setattr(approval_service, "token_hash", counted_hash)
    world.ctx = replace(world.ctx, store=SpyStore(world.store, log))
    return world, log


@pytest.mark.parametrize("populated", [False, True], ids=["empty", "populated"])
@pytest.mark.parametrize("token", UNKNOWN_TOKENS, ids=range(len(UNKNOWN_TOKENS)))
def test_an_unknown_token_costs_one_hash_and_one_lookup(
    token: str, populated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, log = spied_world(populated, monkeypatch)
    with pytest.raises(ApprovalUnavailable) as refused:
        approve(world.ctx, token=token, provenance=world.who)
    assert log == ["hash", "get_lookup"]
    assert (refused.value.code, refused.value.detail) == (
        "approval_unavailable",
        ApprovalUnavailable.default_detail,
    )


def test_every_known_token_starts_with_the_same_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """No path returns before hashing and looking up: refusals of real tokens
    (wrong caller, consumed, revoked) begin exactly like an unknown token."""
    world, log = spied_world(True, monkeypatch)
    proposal_id = world.propose()
    first, sibling = world.present(proposal_id), world.present(proposal_id)
    stranger = Provenance("bob", "ib-bob", "cb2", "conv-2")
    cases: list[tuple[str, Provenance]] = [
        (first.token, stranger),  # wrong caller
        (first.token, world.who),  # the claim
        (first.token, world.who),  # consumed: converges
        (sibling.token, world.who),  # revoked sibling: converges
        (sibling.token, stranger),
    ]
    for token, who in cases:
        log.clear()
        with contextlib.suppress(ApprovalUnavailable):
            approve(world.ctx, token=token, provenance=who)
        assert log[:2] == ["hash", "get_lookup"], log


@pytest.mark.parametrize(
    "presented",
    [
        lambda b: {},
        lambda b: {"Authorization": "Bearer not-a-jwt"},
        lambda b: {"Authorization": "Bearer " + "e" * 9000},
        lambda b: b("admin", ttl_seconds=-60),
        lambda b: b("admin", key="another-secret-of-at-least-32-characters!"),
        lambda b: {"Authorization": b("channel")["Authorization"][:-4] + "AAAA"},
    ],
    ids=["none", "garbage", "oversize", "expired", "wrong_key", "tampered"],
)
def test_a_bearer_token_that_does_not_verify_never_reaches_the_store(
    presented: Callable[[Callable[..., Headers]], Headers],
    client: TestClient,
    ledger: Ledger,
    bearer: Callable[..., Headers],
) -> None:
    log: list[str] = []
    ledger.store = SpyStore(ledger.store, log)  # type: ignore[assignment]
    headers = presented(bearer)
    for method, path, body in [
        ("POST", f"{API}/approvals", {"token": "x" * 43}),
        ("GET", f"{API}/execution-attempts/att_{'0' * 64}", None),
        ("POST", f"{API}/proposals", {"actor_id": "alice", "spec": {}}),
    ]:
        response = client.request(method, path, json=body, headers=headers)
        assert response.status_code == 401, response.text
        assert response.json()["error"] == "unauthenticated"
    assert log == []
