"""An HTTP world for the hardening tests: the memory-store app, role tokens, and
records in every state the routes care about (a queued attempt, an uncertain
one a reconciler can settle, one only an admin can resolve)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.executors.fake import fake_build_digest
from domain.services.approval import Provenance
from domain.spec import ATTEMPT_ID_PREFIX
from tests.support.http_helpers import (
    API,
    DIRECTORY,
    PROVENANCE,
    Headers,
    directory_puts,
    propose_and_present,
    run_worker,
)

STRANGER = Provenance("bob", "ib-bob", "cb-bob", "C999")
ROLES = ("admin", "proposer", "channel", "actor", "metrics", "anonymous")
RELATIONS = ("owner", "non_owner", "missing")
MISSING_ATTEMPT = ATTEMPT_ID_PREFIX + "0" * 64
MISSING_PROPOSAL = "prop_" + "0" * 32


def flat_routes(app: FastAPI) -> Iterator[tuple[str, str, Any]]:
    """(method, path, route) for every route of the app, included routers flattened.

    Recent FastAPI keeps included routers as one entry each; older ones copy
    their routes into ``app.routes``. Both shapes are walked.
    """
    for route in app.routes:
        contexts = getattr(route, "effective_route_contexts", None)
        for item in contexts() if contexts is not None else [route]:
            for method in sorted(getattr(item, "methods", None) or ()):
                if method != "HEAD":
                    yield method, item.path, item


@dataclass
class HttpWorld:
    """The app client, a token minter and the records every route is tried on."""

    client: TestClient
    ledger: Ledger
    bearer: Callable[..., Headers]
    proposal_id: str = ""
    token: str = ""
    queued: str = ""
    reconcilable: str = ""
    resolvable: str = ""
    cancelable: str = ""
    decline_token: str = ""

    def headers(self, role: str, relation: str = "owner") -> Headers:
        """The caller of a role; ``non_owner`` is someone who does not own the records."""
        if role == "anonymous":
            return {}
        if role == "actor":
            return self.bearer("actor", subject="alice" if relation != "non_owner" else "mallory")
        if role == "channel":
            who = STRANGER if relation == "non_owner" else PROVENANCE
            return self.bearer("channel", subject="chat-backend", provenance=who)
        if role == "proposer":  # the records' proposer, or another backend
            subject = "other-backend" if relation == "non_owner" else "assistant-backend"
            return self.bearer("proposer", subject=subject)
        if role == "metrics":
            return self.bearer("metrics", subject="prometheus")
        return self.bearer("admin", subject="ops")

    def approve(self, token: str, headers: Headers) -> Any:
        return self.client.post(f"{API}/approvals", json={"token": token}, headers=headers)

    def revision(self, attempt_id: str) -> int:
        view = self.client.get(
            f"{API}/execution-attempts/{attempt_id}", headers=self.headers("admin")
        )
        revision: int = view.json()["revision"]
        return revision


def build_world(client: TestClient, ledger: Ledger, bearer: Callable[..., Headers]) -> HttpWorld:
    world = HttpWorld(client, ledger, bearer)
    for path, body in directory_puts():
        response = client.put(DIRECTORY + path, json=body, headers=world.headers("admin"))
        assert response.status_code == 200, response.text

    def approved(**spec: Any) -> str:
        token = propose_and_present(client, bearer, **spec)
        answer = world.approve(token, world.headers("channel"))
        assert answer.status_code == 202, answer.text
        attempt_id: str = answer.json()["attempt_id"]
        return attempt_id

    world.queued = approved()
    world.reconcilable = approved(
        capability="fake.correlation_lookup",
        executor_build=fake_build_digest("fake.correlation_lookup"),
        content={"simulate": "unsafe_receipt"},
    )
    world.resolvable = approved(
        capability="fake.operator_only",
        executor_build=fake_build_digest("fake.operator_only"),
        content={"simulate": "timeout_after_effect"},
    )
    for attempt_id in (world.reconcilable, world.resolvable):
        assert run_worker(ledger, attempt_id) == "outcome_unknown"
    world.token = propose_and_present(client, bearer)
    created = client.post(
        f"{API}/proposals",
        headers=world.headers("proposer"),
        json={"actor_id": "alice", "spec": _spec()},
    )
    world.proposal_id = created.json()["proposal_id"]
    another = client.post(
        f"{API}/proposals",
        headers=world.headers("proposer"),
        json={"actor_id": "alice", "spec": _spec()},
    )
    world.cancelable = another.json()["proposal_id"]
    world.decline_token = propose_and_present(client, bearer)
    return world


def _spec() -> dict[str, Any]:
    from tests.support.http_helpers import spec

    return spec()
