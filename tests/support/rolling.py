"""A rolling deploy over real processes: two ``ledger serve`` on one store, one
hosting build v1 of ``tasks.create`` only, the other v1 (draining) and v2, while
attempts of both builds are approved and one of the servers restarts.

The builds are two entries of the ``http`` executor against the reference
provider (``tests/support/provider.py``, a process of its own), differing in
``timeout_seconds`` only, so their digests differ. v1 proposals are made where
v1 is current, v2 proposals where v2 is; every approval goes to whichever
server answers, so approvals of v2 land on the server without v2 too.

    python -m tests.support.rolling --store sqlite            # print one row
    python -m tests.support.rolling --code-dir DIR --no-draining   # DIR's servers

``--code-dir`` runs the servers from another checkout (for before/after
figures); ``--no-draining`` writes both entries as current (older code has no
``draining`` key).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from domain.attempt import ExecutionAttempt
from tests.support.factories import schema_digest_for
from tests.support.http_approvals import API, DIGEST, WHO, headers
from tests.support.restart import Harness, Process, StoreUnderTest

CAPABILITY = "tasks.create"
TOKEN_ENV = "TASKS_TOKEN"
SETTLE_SECONDS = 90.0
TERMINAL = {"succeeded", "failed_safe", "outcome_unknown", "manually_resolved"}


@dataclass
class Rollout:
    """What one rolling deploy found."""

    store: str
    approved: dict[str, str] = field(default_factory=dict)  # attempt id -> build label
    refused: int = 0  # approvals no server accepted
    statuses: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    effects: dict[str, int] = field(default_factory=dict)  # idempotency key -> effects
    keys: dict[str, str] = field(default_factory=dict)  # attempt id -> idempotency key
    builds: dict[str, str] = field(default_factory=dict)  # attempt id -> executor build

    def row(self) -> str:
        one = sum(1 for a in self.approved if self.effects.get(self.keys.get(a, ""), 0) == 1)
        return (
            f"| {self.store} | {len(self.approved)} | {self.refused} | "
            f"{self.statuses['succeeded']} | {self.reasons['executor_not_registered']} | "
            f"{one} | {max(self.effects.values(), default=0)} |"
        )


def entry(provider_url: str, timeout: int, *, draining: bool = False) -> str:
    return (
        f'[[http]]\ncapability = "{CAPABILITY}"\ndelivery_mode = "provider_idempotency"\n'
        f'url = "{provider_url}/v1/{{destination}}"\ntimeout_seconds = {timeout}\n'
        f'headers = {{ Authorization = "env:{TOKEN_ENV}" }}\nreceipt = ["/id"]\n'
        + ("draining = true\n" if draining else "")
    )


class Deploy:
    """Two servers on one store, their executors files and the provider."""

    def __init__(
        self,
        harness: Harness,
        provider_url: str,
        provider_token: str,
        *,
        draining: bool = True,
    ) -> None:
        self.harness = harness
        self.provider_url = provider_url
        folder = harness.workdir
        self.v1_file = folder / "executors-v1.toml"
        self.v1_file.write_text(entry(provider_url, 10))
        self.both_file = folder / "executors-v1-v2.toml"
        self.both_file.write_text(
            entry(provider_url, 10, draining=draining) + "\n" + entry(provider_url, 15)
        )
        harness.extra_env.update(
            {
                TOKEN_ENV: f"Bearer {provider_token}",
                "LEDGER_LEASE_SECONDS": "5",  # what a restart cut off is recovered soon
            }
        )

    def serve(self, executors: Path) -> Process:
        self.harness.extra_env["LEDGER_EXECUTORS_FILE"] = str(executors)
        return self.harness.serve(execution=True)

    def digests(self) -> tuple[str, str]:
        """(v1, v2) as `ledger executors` prints them for each file."""

        def listed(path: Path) -> list[list[str]]:
            self.harness.extra_env["LEDGER_EXECUTORS_FILE"] = str(path)
            out = self.harness.run("executors", execution=True)
            return [line.split() for line in out.splitlines() if line.startswith(CAPABILITY)]

        (v1,) = [fields[1] for fields in listed(self.v1_file)]
        both = {fields[1] for fields in listed(self.both_file)}
        (v2,) = both - {v1}
        return v1, v2


def spec(build: str, n: int) -> dict[str, Any]:
    expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
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


def set_up(base: str, builds: list[str]) -> None:
    admin = headers("admin", subject="root")
    puts: list[tuple[str, dict[str, Any]]] = [
        ("/actors/alice", {"enabled": True}),
        (
            "/identity-bindings/ib-alice",
            {"actor_id": "alice", "channel": "slack", "external_id": "U1", "active": True},
        ),
        (
            "/channel-bindings/cb-general",
            {"conversation_key": "C042", "channel": "slack", "active": True},
        ),
        ("/actors/alice/permissions/tasks.write", {"granted": True}),
        *(
            (
                f"/executor-builds/{CAPABILITY}/{build}",
                {"delivery_mode": "provider_idempotency", "available": True},
            )
            for build in builds
        ),
    ]
    with httpx.Client(base_url=base + API, timeout=30) as client:
        for path, body in puts:
            client.put("/directory" + path, json=body, headers=admin).raise_for_status()


def present(base: str, build: str, count: int, offset: int) -> list[str]:
    """``count`` proposals on ``build`` made and presented through ``base``: their tokens."""
    proposer = headers("proposer", subject="assistant")
    tokens = []
    with httpx.Client(base_url=base + API, timeout=30) as client:
        for n in range(offset, offset + count):
            created = client.post(
                "/proposals", headers=proposer, json={"actor_id": "alice", "spec": spec(build, n)}
            )
            created.raise_for_status()
            shown = client.post(
                f"/proposals/{created.json()['proposal_id']}/presentations",
                headers=proposer,
                json={
                    "version": 1,
                    "identity_binding_id": WHO.identity_binding_id,
                    "channel_binding_id": WHO.channel_binding_id,
                    "conversation_key": WHO.conversation_key,
                },
            )
            shown.raise_for_status()
            tokens.append(shown.json()["token"])
    return tokens


def approve_anywhere(servers: list[Process], token: str, turn: int) -> str | None:
    """Approve through whichever server answers (starting with ``turn``'s); the
    attempt id, or None when every server that answered refused it."""
    channel = headers("channel", subject="slack-bot", provenance=WHO)
    for step in range(len(servers) * 20):
        server = servers[(turn + step) % len(servers)]
        try:
            answer = httpx.post(
                server.base + API + "/approvals", json={"token": token}, headers=channel, timeout=10
            )
        except httpx.TransportError:
            time.sleep(0.1)  # that server is restarting: try the other
            continue
        if answer.status_code == 202:
            attempt_id: str = answer.json()["attempt_id"]
            return attempt_id
        if answer.status_code == 404:
            return None
        time.sleep(0.1)
    return None


def rollout(
    deploy: Deploy, *, per_build: int = 50, restart: str = "both", stop: str = "sigkill"
) -> Rollout:
    """The scenario: see the module docstring. ``restart`` names the server that
    restarts while the approvals run (``v1`` or ``both``)."""
    store = deploy.harness.store
    found = Rollout(store.kind)
    v1, v2 = deploy.digests()
    v1_only = deploy.serve(deploy.v1_file)
    both = deploy.serve(deploy.both_file)
    set_up(both.base, [v1, v2])
    tokens = [(t, "v1") for t in present(v1_only.base, v1, per_build, 0)]
    tokens += [(t, "v2") for t in present(both.base, v2, per_build, per_build)]
    tokens = [tokens[i // 2 + (i % 2) * per_build] for i in range(len(tokens))]  # interleave
    servers = [v1_only, both]
    restarting = 1 if restart == "both" else 0
    cut = len(tokens) // 3

    def restart_one() -> None:
        servers[restarting].stop(stop)
        files = [deploy.v1_file, deploy.both_file]
        servers[restarting] = deploy.serve(files[restarting])

    restarter: threading.Thread | None = None
    for number, (token, label) in enumerate(tokens):
        if number == cut:
            restarter = threading.Thread(target=restart_one)
            restarter.start()
        attempt_id = approve_anywhere(list(servers), token, number)
        if attempt_id is None:
            found.refused += 1
        else:
            found.approved[attempt_id] = label
    if restarter is not None:
        restarter.join(timeout=120)
    settle(found, store)
    return found


def settle(found: Rollout, store: StoreUnderTest) -> None:
    """Wait (bounded) until every approved attempt is settled, then read the outcomes."""
    deadline = time.monotonic() + SETTLE_SECONDS
    with store.ledger() as ledger:
        while True:
            states = {a: ledger.store.get(ExecutionAttempt, a) for a in found.approved}
            if all(s is not None and s.status.value in TERMINAL for s in states.values()):
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.25)
        for attempt_id, state in states.items():
            assert state is not None
            found.statuses[state.status.value] += 1
            reason = (state.result or {}).get("reason_code")
            if reason:
                found.reasons[str(reason)] += 1
            found.keys[attempt_id] = state.idempotency_key
            found.builds[attempt_id] = state.executor_build


HEADER = (
    "| store | approved | approvals refused | succeeded | executor_not_registered | "
    "attempts with exactly one effect | most effects for one key |\n|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=["sqlite", "dynamodb"], default="sqlite")
    parser.add_argument("--code-dir", type=Path, default=None)
    parser.add_argument("--no-draining", action="store_true")
    parser.add_argument("--per-build", type=int, default=50)
    args = parser.parse_args()
    import json
    import os
    import urllib.request

    from tests.support.provider_fixtures import start_provider

    node: Any = None
    process, provider = start_provider("rolling-" + os.urandom(8).hex())
    try:
        with tempfile.TemporaryDirectory() as folder:
            if args.store == "sqlite":
                store = StoreUnderTest.sqlite(Path(folder))
            else:
                from tests.support import ministack
                from tests.support.restart import _store

                node = ministack.start()
                store = _store("dynamodb", Path(folder), node.url)
            harness = Harness(store, Path(folder), args.code_dir)
            try:
                deploy = Deploy(
                    harness, provider.url, provider.token, draining=not args.no_draining
                )
                found = rollout(deploy, per_build=args.per_build)
            finally:
                harness.close()
        with urllib.request.urlopen(provider.url + "/_effects", timeout=10) as answer:
            found.effects = json.loads(answer.read())["effects"]
        print(HEADER)
        print(found.row(), flush=True)
    finally:
        process.terminate()
        process.wait(timeout=10)
        if node is not None:
            node.stop()


if __name__ == "__main__":
    main()
