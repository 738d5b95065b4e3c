"""The console shows how a version is decided: its kind, the votes recorded (who,
when), how many it needs, who can still vote and an escalation's group; and a
member signed in with their own actor token sees what waits for their vote
and no other page."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.bootstrap import Ledger
from adapters.settings import Settings
from api.http.auth import mint_token
from domain.proposal import Proposal
from domain.services.approval import Provenance
from domain.services.escalation import escalate_if_due
from domain.timeutil import parse_utc
from tests.support.cli import invoke
from tests.support.console import admin_session, sign_in
from tests.support.http_helpers import API, DIRECTORY, PROVENANCE, Headers, spec

QUORUM = """
@id("two-of-finance")
@quorum("2")
@group("finance")
@escalate_to("leads")
@escalate_before("10m")
permit (principal, action == Action::"fake.provider_idempotency", resource);
"""
pytestmark = pytest.mark.usefixtures("directory")


def member(name: str) -> Provenance:
    return Provenance(name, f"ib-{name}", f"cb-{name}", f"conv-{name}")


def enrol(client: TestClient, admin: Headers, name: str, group: str) -> None:
    who = member(name)
    for path, body in (
        (f"/actors/{name}", {"enabled": True, "groups": [group]}),
        (
            f"/identity-bindings/{who.identity_binding_id}",
            {"actor_id": name, "channel": "slack", "external_id": f"U-{name}", "active": True},
        ),
        (
            f"/channel-bindings/{who.channel_binding_id}",
            {"conversation_key": who.conversation_key, "channel": "slack", "active": True},
        ),
    ):
        answer = client.put(DIRECTORY + path, json=body, headers=admin)
        assert answer.status_code == 200, answer.text


def present(client: TestClient, bearer: Callable[..., Headers], pid: str, name: str) -> str:
    who = member(name)
    shown = client.post(
        f"{API}/proposals/{pid}/presentations",
        headers=bearer("proposer", subject="assistant-backend"),
        json={
            "version": 1,
            "identity_binding_id": who.identity_binding_id,
            "channel_binding_id": who.channel_binding_id,
            "conversation_key": who.conversation_key,
            "actor_id": name,
        },
    )
    assert shown.status_code == 201, shown.text
    token: str = shown.json()["token"]
    return token


def vote(client: TestClient, bearer: Callable[..., Headers], token: str, name: str) -> Any:
    answer = client.post(
        f"{API}/approvals",
        json={"token": token},
        headers=bearer("channel", provenance=member(name)),
    )
    assert answer.status_code == 202, answer.text
    return answer.json()


def propose(client: TestClient, bearer: Callable[..., Headers], admin: Headers) -> str:
    applied = client.put(f"{API}/policies", json={"text": QUORUM}, headers=admin)
    assert applied.status_code == 200, applied.text
    created = client.post(
        f"{API}/proposals",
        headers=bearer("proposer", subject="assistant-backend"),
        json={
            "actor_id": PROVENANCE.actor_id,
            "spec": spec(policy_digest=applied.json()["digest"]),
        },
    )
    assert created.status_code == 201, created.text
    pid: str = created.json()["proposal_id"]
    return pid


def ballots(page: str) -> str:
    """The 'waiting for ... vote' section of an inbox page."""
    return page.split('id="ballots"')[1].split("</section>")[0]


def member_browser(settings: Settings, browser: TestClient, name: str) -> TestClient:
    answer = sign_in(browser, mint_token(settings, subject=name, role="actor"))
    assert answer.status_code == 303 and answer.headers["location"] == "/console/inbox"
    return browser


def test_a_quorum_shows_its_votes_and_each_member_sees_what_waits_for_them(
    client: TestClient,
    browser: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
    admin: Headers,
) -> None:
    for name in ("m1", "m2", "m3"):
        enrol(client, admin, name, "finance")
    pid = propose(client, bearer, admin)
    tokens = {name: present(client, bearer, pid, name) for name in ("m1", "m2")}
    member_browser(settings, browser, "m1")
    page = browser.get("/console/inbox").text
    waiting = ballots(page)
    assert pid in waiting and '<span class="kind">quorum</span> 0 of 2' in waiting
    assert "can still vote: m1, m2" in waiting and "finance" in waiting
    assert "Find attempts" not in page and "Your approvals" in page
    # a member's session opens their inbox only, whatever actor it names
    for path in ("/console", "/console/attempts", "/console/webhooks", "/console/attempts/att_x"):
        answer = browser.get(path, follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/console/inbox", path
    assert pid in ballots(browser.get("/console/inbox", params={"actor_id": "m3"}).text)

    first = vote(client, bearer, tokens["m1"], "m1")
    assert (first["status"], first["votes"], first["required"]) == ("vote_recorded", 1, 2)
    assert pid not in ballots(browser.get("/console/inbox").text)  # m1 has voted
    browser.cookies.clear()
    member_browser(settings, browser, "m2")
    waiting = ballots(browser.get("/console/inbox").text)
    assert '<span class="kind">quorum</span> 1 of 2' in waiting
    voted_at = ledger.store.get(Proposal, pid).votes(1)[0]["at"]  # type: ignore[union-attr]
    assert f"<li>m1 <time>{voted_at}</time></li>" in waiting
    assert "can still vote: m2" in waiting
    browser.cookies.clear()
    member_browser(settings, browser, "m3")
    assert "None." in ballots(browser.get("/console/inbox").text)  # never presented

    done = vote(client, bearer, tokens["m2"], "m2")
    attempt_id = done["attempt_id"]
    assert done["status"] == "execution_pending" and attempt_id
    browser.cookies.clear()
    admin_session(browser, settings)
    attempt = browser.get(f"/console/attempts/{attempt_id}").text
    decided = attempt.split('id="decision">')[1].split("</dd>")[0]
    assert '<span class="kind">quorum</span> 2 of 2' in decided
    assert f"<li>m1 <time>{voted_at}</time></li>" in decided and "<li>m2 <time>" in decided
    found = browser.get("/console/attempts", params={"capability": "fake.provider_idempotency"})
    assert re.search(
        r'data-label="Approval"><span class="kind">quorum</span> 2 of 2: m1, m2', found.text
    )
    claimed = browser.get("/console/inbox", params={"actor_id": "alice", "status": "claimed"})
    assert '<span class="kind">quorum</span> 2 of 2' in claimed.text


def test_an_escalated_version_names_its_fallback_group(
    client: TestClient,
    browser: TestClient,
    settings: Settings,
    ledger: Ledger,
    bearer: Callable[..., Headers],
    admin: Headers,
) -> None:
    enrol(client, admin, "m1", "finance")
    enrol(client, admin, "lead1", "leads")
    pid = propose(client, bearer, admin)
    present(client, bearer, pid, "m1")
    proposal = ledger.store.get(Proposal, pid)
    assert proposal is not None
    ledger.clock.moment = parse_utc(proposal.expiry_of(1)) - timedelta(minutes=5)  # type: ignore[attr-defined]
    assert escalate_if_due(ledger.context, pid)
    ledger.projector.project_proposal(pid)
    present(client, bearer, pid, "lead1")
    member_browser(settings, browser, "m1")
    assert "None." in ballots(browser.get("/console/inbox").text)  # revoked by the escalation
    browser.cookies.clear()
    member_browser(settings, browser, "lead1")
    waiting = ballots(browser.get("/console/inbox").text)
    assert pid in waiting and "escalated to leads" in waiting
    assert '<span class="kind">quorum</span> 0 of 2 from <code>leads</code>' in waiting
    browser.cookies.clear()
    admin_session(browser, settings)
    own = browser.get("/console/inbox", params={"actor_id": "alice"}).text
    assert "escalated to leads" in own.split('id="own"')[1]


def test_an_unknown_or_disabled_actor_token_opens_nothing(
    client: TestClient, browser: TestClient, settings: Settings, admin: Headers
) -> None:
    answer = client.put(DIRECTORY + "/actors/gone", json={"enabled": False}, headers=admin)
    assert answer.status_code == 200, answer.text
    for name in ("gone", "nobody"):
        refused = sign_in(browser, mint_token(settings, subject=name, role="actor"))
        assert refused.status_code == 401 and "This token cannot open the console." in refused.text
        assert browser.get("/console/inbox", follow_redirects=False).status_code == 303


def test_the_readme_member_sign_in_runs_as_written(
    client: TestClient, browser: TestClient, admin: Headers
) -> None:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"<!-- console-member:start -->\s*```sh\n(.*?)```", text, re.S)
    assert block, "README console-member markers not found"
    command = block.group(1).split("#")[0].split()
    assert command[0] == ".venv/bin/ledger"
    made = invoke(command[1:], LEDGER_STORE="memory")
    assert made.exit_code == 0, made.stderr
    enrol(client, admin, "m1", "finance")
    answer = sign_in(browser, made.stdout.strip())
    assert answer.status_code == 303 and answer.headers["location"] == "/console/inbox"
    assert "Your approvals" in browser.get("/console/inbox").text
