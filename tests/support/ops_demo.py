"""Pending work to watch while following docs/operations.md: a small client of the
HTTP API (development tokens, signed with the development secret).

    python -m tests.support.ops_demo directory BUILD...         # alice may approve these builds
    python -m tests.support.ops_demo pending BUILD --queued 10 --open 10 --tokens FILE
    python -m tests.support.ops_demo approve --tokens FILE      # every saved presentation
    python -m tests.support.ops_demo propose BUILD [--approve]  # one more, on BUILD
    python -m tests.support.ops_demo wait --expect N --provider URL

``API`` (the ``/api/conversational`` base URL) comes from the environment. Each
command prints one line; a refusal exits 1 with the error code the API gave.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from adapters.settings import load_settings
from api.http.auth import mint_token
from domain.services.approval import Provenance
from tests.support.factories import schema_digest_for

CAPABILITY = "tasks.create"
WHO = Provenance("alice", "ib-alice", "cb-kitchen", "conv-42")
DIGEST = "sha256:" + "ab" * 32
WAIT_SECONDS = 120.0


def bearer(role: str, subject: str, **claims: Any) -> dict[str, str]:
    """A development token (the server runs with the development secret)."""
    token = mint_token(load_settings(env="development"), subject=subject, role=role, **claims)
    return {"Authorization": f"Bearer {token}"}


def admin() -> dict[str, str]:
    return bearer("admin", "ops")


def proposer() -> dict[str, str]:
    return bearer("proposer", "assistant-backend")


def channel() -> dict[str, str]:
    return bearer("channel", "chat-backend", provenance=WHO)


def client() -> httpx.Client:
    return httpx.Client(base_url=os.environ["API"], timeout=30)


def refused(answer: httpx.Response) -> None:
    try:
        code = answer.json().get("error", answer.status_code)
    except ValueError:
        code = answer.status_code
    print(f"refused: {answer.status_code} {code}")
    raise SystemExit(1)


def directory(builds: list[str]) -> None:
    puts: list[tuple[str, dict[str, Any]]] = [
        ("actors/alice", {"enabled": True}),
        (
            "identity-bindings/ib-alice",
            {"actor_id": "alice", "channel": "chat", "external_id": "alice@chat", "active": True},
        ),
        (
            "channel-bindings/cb-kitchen",
            {"conversation_key": "conv-42", "channel": "chat", "active": True},
        ),
        ("actors/alice/permissions/tasks.write", {"granted": True}),
        *(
            (
                f"executor-builds/{CAPABILITY}/{build}",
                {"delivery_mode": "provider_idempotency", "available": True},
            )
            for build in builds
        ),
    ]
    with client() as api:
        for path, body in puts:
            answer = api.put(f"/directory/{path}", json=body, headers=admin())
            if answer.status_code != 200:
                refused(answer)
    print(f"directory: alice may approve {len(builds)} build(s) of {CAPABILITY}")


def propose_and_present(api: httpx.Client, build: str, n: int) -> str:
    expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    spec = {
        "capability": CAPABILITY,
        "executor_build": build,
        "plugin_build": DIGEST,
        "schema_digest": schema_digest_for(CAPABILITY),
        "policy_digest": DIGEST,
        "permission": "tasks.write",
        "effect": "create",
        "destination": "tasks",
        "content": {"title": f"task {n}"},
        "sources": [f"message:{n}"],
        "expires_at": expires,
    }
    created = api.post("/proposals", json={"actor_id": "alice", "spec": spec}, headers=proposer())
    if created.status_code != 201:
        refused(created)
    shown = api.post(
        f"/proposals/{created.json()['proposal_id']}/presentations",
        json={
            "version": 1,
            "identity_binding_id": WHO.identity_binding_id,
            "channel_binding_id": WHO.channel_binding_id,
            "conversation_key": WHO.conversation_key,
        },
        headers=proposer(),
    )
    if shown.status_code != 201:
        refused(shown)
    token: str = shown.json()["token"]
    return token


def approve_one(api: httpx.Client, token: str) -> str:
    answer = api.post("/approvals", json={"token": token}, headers=channel())
    if answer.status_code != 202:
        refused(answer)
    attempt_id: str = answer.json()["attempt_id"]
    return attempt_id


def pending(build: str, queued: int, open_: int, tokens: Path | None) -> None:
    """``queued`` proposals approved and ``open_`` presented; returns once the inbox
    lists the open ones (what ``ledger executors check`` reads)."""
    stamp = time.time_ns()
    with client() as api:
        before = inbox_size(api)
        for n in range(queued):
            approve_one(api, propose_and_present(api, build, stamp + n))
        saved = [propose_and_present(api, build, stamp + queued + n) for n in range(open_)]
        deadline = time.monotonic() + WAIT_SECONDS
        while inbox_size(api) < before + open_ and time.monotonic() < deadline:
            time.sleep(0.1)
    if tokens is not None:
        tokens.write_text(json.dumps(saved))
    where = f" (tokens in {tokens})" if tokens is not None else ""
    print(f"pending: {queued} approved, {open_} presentations open{where}")


def inbox_size(api: httpx.Client) -> int:
    """Proposals waiting in alice's inbox, as the projection lists them."""
    total, cursor = 0, None
    while True:
        params: dict[str, Any] = {"actor_id": "alice", "status": "presented", "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = api.get("/proposals", params=params, headers=admin())
        if page.status_code != 200:
            refused(page)
        body = page.json()
        total += len(body["items"])
        cursor = body.get("next_cursor")
        if cursor is None:
            return total


def approve(tokens: Path) -> None:
    saved = json.loads(tokens.read_text())
    with client() as api:
        for token in saved:
            approve_one(api, token)
    print(f"approved: {len(saved)}")


def propose(build: str, then_approve: bool) -> None:
    with client() as api:
        token = propose_and_present(api, build, time.time_ns())
        print(f"approved: {approve_one(api, token)}" if then_approve else "proposed and presented")


def count(api: httpx.Client, status: str) -> int:
    total, cursor = 0, None
    while True:
        params: dict[str, Any] = {"status": status, "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = api.get("/execution-attempts", params=params, headers=admin()).json()
        total += len(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return total


def wait(expect: int, provider: str) -> None:
    statuses = ("succeeded", "failed_safe", "outcome_unknown", "queued", "executing")
    deadline = time.monotonic() + WAIT_SECONDS
    with client() as api:
        while True:
            found = {status: count(api, status) for status in statuses}
            if found["succeeded"] >= expect or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    effects = httpx.get(provider + "/_effects", timeout=10).json()["effects"]
    print(
        " ".join(f"{status}={number}" for status, number in found.items())
        + f"; provider: {len(effects)} keys, at most {max(effects.values(), default=0)} "
        "effect(s) per key"
    )
    if found["succeeded"] != expect or found["failed_safe"] or found["outcome_unknown"]:
        raise SystemExit(1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("directory").add_argument("builds", nargs="+")
    made = commands.add_parser("pending")
    made.add_argument("build")
    made.add_argument("--queued", type=int, default=10)
    made.add_argument("--open", type=int, default=10)
    made.add_argument("--tokens", type=Path, default=None)
    commands.add_parser("approve").add_argument("--tokens", type=Path, required=True)
    one = commands.add_parser("propose")
    one.add_argument("build")
    one.add_argument("--approve", action="store_true")
    waiting = commands.add_parser("wait")
    waiting.add_argument("--expect", type=int, required=True)
    waiting.add_argument("--provider", required=True)
    args = parser.parse_args(argv)
    if args.command == "directory":
        directory(args.builds)
    elif args.command == "pending":
        pending(args.build, args.queued, args.open, args.tokens)
    elif args.command == "approve":
        approve(args.tokens)
    elif args.command == "propose":
        propose(args.build, args.approve)
    else:
        wait(args.expect, args.provider)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
