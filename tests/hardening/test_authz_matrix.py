"""Authorization matrix: every route x every role x owner / non-owner / missing id.

The routes come from the app's own router table, so a new route without an
expectation here fails ``test_every_route_has_an_expectation``. Where design.md 5.2 and 5.5
says a refusal must not reveal existence (approval failures; an attempt's
status for a non-owner), the refusal is byte-identical to the answer for a
missing record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.executors.fake import fake_build_digest
from tests.support.http_helpers import API, DIRECTORY, Headers, assert_error_body, spec
from tests.support.worlds.http_api import (
    MISSING_ATTEMPT,
    MISSING_PROPOSAL,
    RELATIONS,
    ROLES,
    HttpWorld,
    build_world,
    flat_routes,
)

pytestmark = pytest.mark.usefixtures("hermetic_env")

Request = tuple[str, dict[str, Any] | None, dict[str, Any] | None]  # path, json, params
Build = Callable[[HttpWorld, str], Request]


@dataclass(frozen=True)
class Rule:
    """Who may call a route, and what each relation to the record answers."""

    roles: frozenset[str]  # roles past the role check; "*" = no authentication at all
    build: Build
    answers: dict[str, int]  # relation -> status for an allowed role
    hidden: frozenset[str] = frozenset()  # allowed roles whose non-owner answer == missing
    blind: frozenset[str] = frozenset()  # allowed roles that always get the missing answer
    same_as_missing: bool = False  # such refusals must be byte-identical to the missing one
    overrides: tuple[tuple[str, str, int], ...] = ()  # (role, relation, status) exceptions

    def expected(self, role: str, relation: str) -> int:
        for who, rel, status in self.overrides:
            if (who, rel) == (role, relation):
                return status
        if "*" in self.roles:
            return self.answers[relation]
        if role == "anonymous":
            return 401
        if role not in self.roles:
            return 403
        if role in self.blind or (role in self.hidden and relation == "non_owner"):
            return self.answers["missing"]
        return self.answers[relation]


def ids(existing: str, missing: str) -> Callable[[str], str]:
    return lambda relation: missing if relation == "missing" else existing


def directory(path: str, missing_path: str, body: dict[str, Any] | None = None) -> Build:
    return lambda w, rel: (DIRECTORY + (missing_path if rel == "missing" else path), body, None)


ADMIN = frozenset({"admin"})
EVERYONE = frozenset({"*"})
OK_200 = {"owner": 200, "non_owner": 200, "missing": 200}
FOUND = {"owner": 200, "non_owner": 200, "missing": 404}
BUILD = "sha256:" + "0" * 64
NEW_BUILD = "sha256:" + "1" * 64
FAKE = "fake.provider_idempotency"


def _presentation(w: HttpWorld, rel: str) -> Request:
    target = MISSING_PROPOSAL if rel == "missing" else w.proposal_id
    return (
        f"{API}/proposals/{target}/presentations",
        {
            "version": 1,
            "identity_binding_id": "ib-alice-slack",
            "channel_binding_id": "cb-general",
            "conversation_key": "C042",
        },
        None,
    )


def _approval(w: HttpWorld, rel: str) -> Request:
    return (f"{API}/approvals", {"token": "x" * 43 if rel == "missing" else w.token}, None)


def _decline(w: HttpWorld, rel: str) -> Request:
    return (f"{API}/declines", {"token": "x" * 43 if rel == "missing" else w.decline_token}, None)


def _proposal(suffix: str = "") -> Build:
    def build(w: HttpWorld, rel: str) -> Request:
        target = (
            MISSING_PROPOSAL
            if rel == "missing"
            else (w.cancelable if suffix == "/cancel" else w.proposal_id)
        )
        body = {"version": 1} if suffix == "/cancel" else None
        return f"{API}/proposals/{target}{suffix}", body, None

    return build


def _inbox(w: HttpWorld, rel: str) -> Request:
    actor = "nobody" if rel == "missing" else "alice"
    return f"{API}/proposals", None, {"actor_id": actor, "status": "presented"}


def _attempt(suffix: str = "", which: str = "queued") -> Build:
    def build(w: HttpWorld, rel: str) -> Request:
        attempt = MISSING_ATTEMPT if rel == "missing" else getattr(w, which)
        body: dict[str, Any] | None = None
        if suffix == "/reconcile":
            body = {"expected_revision": 1 if rel == "missing" else w.revision(attempt)}
        elif suffix == "/resolve":
            body = {
                "expected_revision": 1 if rel == "missing" else w.revision(attempt),
                "resolution": "no_effect",
                "reason": "checked the provider console",
            }
        return f"{API}/execution-attempts/{attempt}{suffix}", body, None

    return build


def _redeliver(w: HttpWorld, rel: str) -> Request:
    """A delivery record written straight into the views (no subscription needed)."""
    from projections.webhooks import delivery_id, delivery_row

    ident = delivery_id("matrix", "msg_" + "0" * 40)
    if rel != "missing" and w.ledger.views is not None:
        w.ledger.views.put_view(
            delivery_row(
                {
                    "delivery_id": ident,
                    "subscription_id": "matrix",
                    "notification_id": "msg_x",
                    "type": "attempt.succeeded",
                    "subject_id": w.queued,
                    "subject_version": 1,
                    "status": "failing",
                    "attempts": 1,
                    "next_try_at": "2030-01-01T00:00:00Z",
                    "last_error": "connect",
                    "response_status": None,
                    "created_at": "2030-01-01T00:00:00Z",
                    "updated_at": "2030-01-01T00:00:00Z",
                    "delivered_at": None,
                    "body": {},
                },
                version=1,
            )
        )
    target = delivery_id("matrix", "msg_missing") if rel == "missing" else ident
    return f"{API}/webhook-deliveries/{target}/redeliver", None, None


def _grant_ids(w: HttpWorld) -> dict[str, str]:
    """A standing grant of alice (the owner's, the channel's actor), made once."""
    made: dict[str, str] | None = getattr(w, "matrix_grants", None)
    if made is None:
        from domain.services import grants

        expires = (w.ledger.clock.now() + timedelta(days=30)).isoformat()
        bounds = {"capability": FAKE, "max_uses": 1, "expires_at": expires}
        admin = grants.Grantor("admin", "matrix")
        ctx = w.ledger.context
        grant_id = grants.grant(ctx, actor_id="alice", bounds=bounds, grantor=admin)["grant_id"]
        made = {"owner": grant_id, "non_owner": grant_id, "missing": "sgr_" + "0" * 32}
        w.matrix_grants = made  # type: ignore[attr-defined]
    return made


def _standing_grant(suffix: str = "") -> Build:
    def build(w: HttpWorld, rel: str) -> Request:
        body = {} if suffix else None
        return f"{API}/standing-grants/{_grant_ids(w)[rel]}{suffix}", body, None

    return build


def _new_grant(w: HttpWorld, rel: str) -> Request:
    expires = (w.ledger.clock.now() + timedelta(days=7)).isoformat()
    body = {"actor_id": "alice", "capability": FAKE, "max_uses": 1, "expires_at": expires}
    return f"{API}/standing-grants", body, None


GRANT_ROLES = frozenset({"admin", "channel"})

RULES: dict[tuple[str, str], Rule] = {
    ("GET", "/openapi.json"): Rule(EVERYONE, lambda w, r: ("/openapi.json", None, None), OK_200),
    ("GET", "/docs"): Rule(EVERYONE, lambda w, r: ("/docs", None, None), OK_200),
    ("GET", "/docs/oauth2-redirect"): Rule(
        EVERYONE, lambda w, r: ("/docs/oauth2-redirect", None, None), OK_200
    ),
    ("GET", "/healthz"): Rule(EVERYONE, lambda w, r: ("/healthz", None, None), OK_200),
    ("GET", "/readyz"): Rule(EVERYONE, lambda w, r: ("/readyz", None, None), OK_200),
    ("GET", "/metrics"): Rule(
        frozenset({"metrics"}), lambda w, r: ("/metrics", None, None), OK_200
    ),
    ("PUT", "/api/conversational/directory/actors/{actor_id}"): Rule(
        ADMIN, directory("/actors/alice", "/actors/newcomer", {"enabled": True}), OK_200
    ),
    ("GET", "/api/conversational/directory/actors/{actor_id}"): Rule(
        ADMIN, directory("/actors/alice", "/actors/nobody"), FOUND
    ),
    ("PUT", "/api/conversational/directory/identity-bindings/{binding_id}"): Rule(
        ADMIN,
        directory(
            "/identity-bindings/ib-alice-slack",
            "/identity-bindings/ib-new",
            {"actor_id": "alice", "channel": "slack", "external_id": "U1", "active": True},
        ),
        OK_200,
    ),
    ("GET", "/api/conversational/directory/identity-bindings/{binding_id}"): Rule(
        ADMIN, directory("/identity-bindings/ib-alice-slack", "/identity-bindings/ib-none"), FOUND
    ),
    ("PUT", "/api/conversational/directory/channel-bindings/{binding_id}"): Rule(
        ADMIN,
        directory(
            "/channel-bindings/cb-general",
            "/channel-bindings/cb-new",
            {"conversation_key": "C042", "channel": "slack", "active": True},
        ),
        OK_200,
    ),
    ("GET", "/api/conversational/directory/channel-bindings/{binding_id}"): Rule(
        ADMIN, directory("/channel-bindings/cb-general", "/channel-bindings/cb-none"), FOUND
    ),
    ("PUT", "/api/conversational/directory/actors/{actor_id}/permissions/{permission}"): Rule(
        ADMIN,
        directory(
            "/actors/alice/permissions/tasks.write",
            "/actors/newcomer/permissions/tasks.write",
            {"granted": True},
        ),
        OK_200,
    ),
    ("GET", "/api/conversational/directory/actors/{actor_id}/permissions/{permission}"): Rule(
        ADMIN,
        directory(
            "/actors/alice/permissions/tasks.write", "/actors/nobody/permissions/tasks.write"
        ),
        FOUND,
    ),
    ("PUT", "/api/conversational/directory/executor-builds/{capability}/{build_digest}"): Rule(
        ADMIN,
        directory(
            f"/executor-builds/{FAKE}/{fake_build_digest(FAKE)}",
            f"/executor-builds/{FAKE}/{NEW_BUILD}",
            {"delivery_mode": "provider_idempotency", "available": True},
        ),
        OK_200,
    ),
    ("GET", "/api/conversational/directory/executor-builds/{capability}/{build_digest}"): Rule(
        ADMIN,
        directory(
            f"/executor-builds/{FAKE}/{fake_build_digest(FAKE)}", f"/executor-builds/{FAKE}/{BUILD}"
        ),
        FOUND,
    ),
    ("PUT", "/api/conversational/directory/targets/{target_id}"): Rule(
        ADMIN, directory("/targets/task:42", "/targets/task:new", {"revision": "r7"}), OK_200
    ),
    ("GET", "/api/conversational/directory/targets/{target_id}"): Rule(
        ADMIN, directory("/targets/task:42", "/targets/task:none"), FOUND
    ),
    ("POST", "/api/conversational/proposals"): Rule(
        frozenset({"proposer"}),
        lambda w, rel: (f"{API}/proposals", {"actor_id": "alice", "spec": spec()}, None),
        {"owner": 201, "non_owner": 201, "missing": 201},
    ),
    # a lineage is its proposer's: another proposer gets the missing answer, byte for byte
    ("POST", "/api/conversational/proposals/{proposal_id}/presentations"): Rule(
        frozenset({"proposer"}),
        _presentation,
        {"owner": 201, "non_owner": 201, "missing": 404},
        hidden=frozenset({"proposer"}),
        same_as_missing=True,
    ),
    # its proposer, admins, and the channel of its actor; anyone else's is the missing answer
    ("GET", "/api/conversational/proposals/{proposal_id}"): Rule(
        frozenset({"admin", "proposer", "channel"}),
        _proposal(),
        FOUND,
        hidden=frozenset({"channel", "proposer"}),
        same_as_missing=True,
    ),
    ("POST", "/api/conversational/proposals/{proposal_id}/cancel"): Rule(
        frozenset({"admin", "proposer"}),
        _proposal("/cancel"),
        FOUND,
        hidden=frozenset({"proposer"}),
        same_as_missing=True,
    ),
    # a channel asking for another actor's inbox gets an empty page, like an empty inbox
    ("GET", "/api/conversational/proposals"): Rule(frozenset({"admin", "channel"}), _inbox, OK_200),
    ("POST", "/api/conversational/declines"): Rule(
        frozenset({"channel"}),
        _decline,
        {"owner": 200, "non_owner": 404, "missing": 404},
        same_as_missing=True,
    ),
    ("POST", "/api/conversational/approvals"): Rule(
        frozenset({"channel"}),
        _approval,
        {"owner": 202, "non_owner": 404, "missing": 404},
        same_as_missing=True,
    ),
    ("GET", "/api/conversational/execution-attempts"): Rule(
        ADMIN, lambda w, rel: (f"{API}/execution-attempts", None, {"status": "queued"}), OK_200
    ),
    # the owner (actor or its channel) and admins; a proposer sees no attempt at all
    ("GET", "/api/conversational/execution-attempts/{attempt_id}"): Rule(
        frozenset({"admin", "actor", "channel", "proposer", "metrics"}),
        _attempt(),
        FOUND,
        hidden=frozenset({"actor", "channel"}),
        blind=frozenset({"proposer", "metrics"}),
        same_as_missing=True,
    ),
    ("GET", "/api/conversational/execution-attempts/{attempt_id}/events"): Rule(
        ADMIN, _attempt("/events"), FOUND
    ),
    ("POST", "/api/conversational/execution-attempts/{attempt_id}/reconcile"): Rule(
        ADMIN, _attempt("/reconcile", "reconcilable"), FOUND
    ),
    ("POST", "/api/conversational/execution-attempts/{attempt_id}/resolve"): Rule(
        ADMIN, _attempt("/resolve", "resolvable"), FOUND
    ),
    ("GET", "/api/conversational/webhook-deliveries"): Rule(
        ADMIN, lambda w, rel: (f"{API}/webhook-deliveries", None, {"status": "failing"}), OK_200
    ),
    ("POST", "/api/conversational/webhook-deliveries/{delivery_id}/redeliver"): Rule(
        ADMIN, _redeliver, FOUND
    ),
    ("GET", "/api/conversational/audit/digest"): Rule(
        ADMIN, lambda w, rel: (f"{API}/audit/digest", None, None), OK_200
    ),
    # proposers read the digest their specs name (not the text); admins apply
    ("GET", "/api/conversational/policies"): Rule(
        frozenset({"admin", "proposer"}), lambda w, rel: (f"{API}/policies", None, None), OK_200
    ),
    ("PUT", "/api/conversational/policies"): Rule(
        ADMIN, lambda w, rel: (f"{API}/policies", {"text": ""}, None), OK_200
    ),
    # an admin for any actor; a channel for its own actor (another actor's grant is
    # the missing answer, and another actor's list is empty)
    ("POST", "/api/conversational/standing-grants"): Rule(
        GRANT_ROLES,
        _new_grant,
        {"owner": 201, "non_owner": 201, "missing": 201},
        overrides=(("channel", "non_owner", 403),),  # another actor's channel: refused
    ),
    ("GET", "/api/conversational/standing-grants"): Rule(
        GRANT_ROLES,
        lambda w, rel: (f"{API}/standing-grants", None, {"actor_id": "alice"}),
        OK_200,
    ),
    ("GET", "/api/conversational/standing-grants/{grant_id}"): Rule(
        GRANT_ROLES,
        _standing_grant(),
        FOUND,
        hidden=frozenset({"channel"}),
        same_as_missing=True,
    ),
    ("POST", "/api/conversational/standing-grants/{grant_id}/revoke"): Rule(
        GRANT_ROLES,
        _standing_grant("/revoke"),
        FOUND,
        hidden=frozenset({"channel"}),
        same_as_missing=True,
    ),
    ("GET", "/api/conversational/executors"): Rule(
        frozenset({"proposer", "admin"}), lambda w, rel: (f"{API}/executors", None, None), OK_200
    ),
}


@pytest.fixture
def http_world(client: TestClient, ledger: Ledger, bearer: Callable[..., Headers]) -> HttpWorld:
    return build_world(client, ledger, bearer)


def send(w: HttpWorld, method: str, request: Request, headers: Headers) -> Any:
    path, body, params = request
    return w.client.request(method, path, json=body, params=params, headers=headers)


def cells() -> Iterator[tuple[str, str, str]]:
    for role in ROLES:
        for relation in RELATIONS:
            yield role, relation, f"{role}-{relation}"


def test_every_route_has_an_expectation(client: TestClient) -> None:
    # Console pages authenticate by session cookie, not bearer token: their own
    # matrix (every page x every role, signed in or not) is tests/e2e/test_console.py.
    routes = {
        (method, path)
        for method, path, _ in flat_routes(client.app)  # type: ignore[arg-type]
        if not path.startswith("/console")
    }
    assert routes, "no routes found in the router table"
    missing = sorted(routes - set(RULES))
    assert not missing, f"routes without an authorization expectation: {missing}"
    stale = sorted(set(RULES) - routes)
    assert not stale, f"expectations for routes that no longer exist: {stale}"


def test_the_whole_matrix(http_world: HttpWorld, client: TestClient) -> None:
    """Every route x role x relation answers as its rule says; refusals that must not
    reveal existence are byte-identical to the missing answer."""
    checked = 0
    mismatches: list[str] = []
    for method, path, _ in flat_routes(client.app):  # type: ignore[arg-type]
        if path.startswith("/console"):
            continue  # cookie sessions: tests/e2e/test_console.py
        rule = RULES[(method, path)]
        for role, relation, _cell in cells():
            headers = http_world.headers(role, relation)
            response = send(http_world, method, rule.build(http_world, relation), headers)
            expected = rule.expected(role, relation)
            checked += 1
            if response.status_code != expected:
                mismatches.append(
                    f"{method} {path} as {role}/{relation}: "
                    f"{response.status_code} != {expected} {response.text[:120]}"
                )
                continue
            if response.status_code >= 400:
                body = response.json()
                assert_error_body(body, response.status_code)
            refused = expected == rule.answers["missing"] and relation != "missing"
            if rule.same_as_missing and refused and role in rule.roles:
                missing = send(
                    http_world,
                    method,
                    rule.build(http_world, "missing"),
                    http_world.headers(role, "missing"),
                )
                assert response.content == missing.content, (method, path, role)
                assert dict(response.headers) == dict(missing.headers), (method, path, role)
    assert not mismatches, "\n".join(mismatches)
    assert checked == len(RULES) * len(ROLES) * len(RELATIONS)


def test_a_proposer_and_a_stranger_get_the_missing_answer_for_an_attempt(
    http_world: HttpWorld,
) -> None:
    missing = http_world.client.get(
        f"{API}/execution-attempts/{MISSING_ATTEMPT}",
        headers=http_world.headers("actor", "non_owner"),
    )
    for role in ("actor", "channel", "proposer"):
        hidden = http_world.client.get(
            f"{API}/execution-attempts/{http_world.queued}",
            headers=http_world.headers(role, "non_owner"),
        )
        assert hidden.status_code == 404
        assert hidden.content == missing.content


def test_a_channel_service_of_another_channel_gets_the_missing_answer_byte_for_byte(
    http_world: HttpWorld,
) -> None:
    """The world's bindings are on channel "slack"; a "telegram" service asserting
    them learns nothing: approvals, declines and reads answer as for nothing."""
    from dataclasses import asdict

    from tests.support.http_helpers import PROVENANCE

    w = http_world
    telegram = w.bearer("channel", subject="telegram-bot", provenance=None, channel="telegram")
    asserted = asdict(PROVENANCE)
    for route, token in (("approvals", w.token), ("declines", w.decline_token)):
        refused = w.client.post(
            f"{API}/{route}", json={"token": token, "provenance": asserted}, headers=telegram
        )
        missing = w.client.post(
            f"{API}/{route}", json={"token": "x" * 43, "provenance": asserted}, headers=telegram
        )
        assert refused.status_code == 404, refused.text
        assert refused.content == missing.content and dict(refused.headers) == dict(missing.headers)
    hidden = w.client.get(f"{API}/execution-attempts/{w.queued}", headers=telegram)
    missing = w.client.get(f"{API}/execution-attempts/{MISSING_ATTEMPT}", headers=telegram)
    assert hidden.status_code == 404 and hidden.content == missing.content
    # nothing was consumed: the slack service still approves the world's token
    slack = w.bearer("channel", subject="slack-app", provenance=None, channel="slack")
    answer = w.client.post(
        f"{API}/approvals", json={"token": w.token, "provenance": asserted}, headers=slack
    )
    assert answer.status_code == 202, answer.text


# -- scoping rows: a lineage is its proposer's, keys are each caller's (issue 26) ----------

OWNER = "owner"
OTHER = "non_owner"


def _revise(w: HttpWorld, rel: str) -> Request:
    lineage = MISSING_PROPOSAL if rel == "missing" else w.proposal_id
    body = {"actor_id": "alice", "lineage_id": lineage, "spec": spec(content={"title": "v2"})}
    return f"{API}/proposals", body, None


def _present_to_bob(w: HttpWorld, rel: str) -> Request:
    path, body, params = _presentation(w, rel)
    assert body is not None
    return path, {**body, "identity_binding_id": "ib-bob"}, params


# (what, build, {relation: status}): the proposer role as the owner, another proposer
# and for a missing id; every refusal of another proposer is the missing answer
SCOPED_ROWS: list[tuple[str, Build, dict[str, int]]] = [
    ("revise a lineage", _revise, {OWNER: 201, OTHER: 404, "missing": 404}),
    ("present", _presentation, {OWNER: 201, OTHER: 404, "missing": 404}),
    ("read", _proposal(), {OWNER: 200, OTHER: 404, "missing": 404}),
    ("cancel", _proposal("/cancel"), {OWNER: 200, OTHER: 404, "missing": 404}),
    # another actor's identity binding: refused for the owner, hidden from anyone else
    ("present to bob's binding", _present_to_bob, {OWNER: 422, OTHER: 404, "missing": 404}),
]


@pytest.mark.parametrize(("what", "build", "answers"), SCOPED_ROWS, ids=[r[0] for r in SCOPED_ROWS])
def test_a_lineage_answers_only_its_proposer(
    http_world: HttpWorld, what: str, build: Build, answers: dict[str, int]
) -> None:
    w = http_world
    w.client.put(
        f"{DIRECTORY}/identity-bindings/ib-bob",
        json={"actor_id": "bob", "channel": "slack", "external_id": "U2", "active": True},
        headers=w.headers("admin"),
    )
    missing = send(
        w, "POST" if what != "read" else "GET", build(w, "missing"), w.headers("proposer")
    )
    for relation, status in answers.items():
        method = "GET" if what == "read" else "POST"
        answer = send(w, method, build(w, relation), w.headers("proposer", relation))
        assert answer.status_code == status, (what, relation, answer.text)
        if relation == OTHER:
            assert answer.content == missing.content, (what, answer.text, missing.text)
            assert dict(answer.headers) == dict(missing.headers)


def test_another_proposers_presentations_never_lock_the_owner_out(http_world: HttpWorld) -> None:
    w = http_world
    build = _presentation(w, OWNER)
    for _ in range(25):
        refused = send(w, "POST", build, w.headers("proposer", OTHER))
        assert refused.status_code == 404, refused.text
    shown = send(w, "POST", build, w.headers("proposer", OWNER))
    assert shown.status_code == 201, shown.text
    assert w.approve(shown.json()["token"], w.headers("channel")).status_code == 202


def test_a_key_another_caller_used_is_neither_refused_nor_answered(http_world: HttpWorld) -> None:
    w = http_world
    path, body, _ = (f"{API}/proposals", {"actor_id": "alice", "spec": spec()}, None)
    mine = {**w.headers("proposer", OWNER), "Idempotency-Key": "shared-key"}
    theirs = {**w.headers("proposer", OTHER), "Idempotency-Key": "shared-key"}
    first = w.client.post(path, json=body, headers=mine)
    other_body = {**body, "spec": spec(content={"title": "Buy bread"})}
    other = w.client.post(path, json=other_body, headers=theirs)
    assert first.status_code == other.status_code == 201, other.text
    assert other.json()["proposal_id"] != first.json()["proposal_id"]
    assert w.client.post(path, json=body, headers=mine).json() == first.json()
    assert w.client.post(path, json=other_body, headers=theirs).json() == other.json()
