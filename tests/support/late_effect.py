"""The late-effect case of issue 25, over real processes and real time.

A ``correlation_lookup`` build of the ``http`` executor with a 2 s timeout and
no settle window written (the defaults), against the reference provider, which
applies the effect 7 s after it received the request, after the client gave
up; its answer reaches nobody. ``ledger serve`` (lease 5 s, recovery every
second) runs the attempt; the harness waits until the attempt is settled and
the provider holds the effect, then reports both.

    python -m tests.support.late_effect                      # this checkout
    python -m tests.support.late_effect --code-dir DIR       # the server runs DIR's code
    python -m tests.support.late_effect --store dynamodb     # on a local ministack

``--code-dir`` runs the server from another checkout (the before/after figures):
on the code before issue 25 the attempt ends ``failed_safe`` while the provider
holds the effect.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.http_approvals import API, approve_one, headers, set_up_directory
from tests.support.provider_fixtures import start_provider, stop_provider
from tests.support.restart import Harness, StoreUnderTest

CAPABILITY = "tasks.create"
TIMEOUT_SECONDS = 2
APPLY_AFTER_SECONDS = 7
SETTLED = {"succeeded", "failed_safe", "outcome_unknown", "effect_after_no_effect"}
WAIT_SECONDS = 120


@dataclass(frozen=True)
class LateEffectRun:
    """What one run ended with."""

    status: str
    reason_code: str | None
    provider_effects: int
    provider_requests: int
    seconds: float


def executors_file(folder: Path, provider_url: str) -> Path:
    path = folder / "executors.toml"
    path.write_text(
        "[[http]]\n"
        f'capability = "{CAPABILITY}"\n'
        'delivery_mode = "correlation_lookup"\n'
        f'url = "{provider_url}/v1/{{destination}}"\n'
        f'lookup_url = "{provider_url}/v1/by-key/{{idempotency_key}}"\n'
        f"timeout_seconds = {TIMEOUT_SECONDS}\n"
        'headers = { Authorization = "env:TASKS_TOKEN" }\n'
        'receipt = ["/id", "/status"]\n'
    )
    return path


def run_late_effect(
    store: StoreUnderTest, workdir: Path, code_dir: Path | None = None
) -> LateEffectRun:
    """One attempt whose provider applies after the client gave up; its outcome."""
    token = "late-effect-" + os.urandom(8).hex()
    process, provider = start_provider(token)
    harness = Harness(store, workdir, code_dir)
    harness.extra_env = {
        "LEDGER_EXECUTORS_FILE": str(executors_file(workdir, provider.url)),
        "TASKS_TOKEN": f"Bearer {token}",
        "LEDGER_LEASE_SECONDS": "5",
        "LEDGER_FAKE_EXECUTORS": "false",
    }
    try:
        listed = harness.run("executors", execution=True)
        build = next(
            line.split()[1] for line in listed.splitlines() if line.startswith(CAPABILITY + " ")
        )
        server = harness.serve(execution=True)
        started = time.monotonic()
        with httpx.Client(base_url=server.base, timeout=30) as client:
            set_up_directory(client, ((CAPABILITY, build, "correlation_lookup"),))
            attempt_id = approve_one(
                client,
                1,
                capability=CAPABILITY,
                build=build,
                content={"fault": "apply_late", "delay": APPLY_AFTER_SECONDS},
            )
            admin = headers("admin", subject="root")
            view: dict[str, object] = {}
            while time.monotonic() - started < WAIT_SECONDS:
                view = client.get(f"{API}/execution-attempts/{attempt_id}", headers=admin).json()
                applied = sum(provider.effects().values())
                waited = time.monotonic() - started
                # settled, the provider has applied, and the settlement is not about to move
                if view.get("status") in SETTLED and applied and waited > APPLY_AFTER_SECONDS + 3:
                    break
                time.sleep(0.5)
            result = view.get("result") or {}
            assert isinstance(result, dict)
            return LateEffectRun(
                status=str(view.get("status")),
                reason_code=result.get("reason_code"),
                provider_effects=sum(provider.effects().values()),
                provider_requests=sum(provider.requests().values()),
                seconds=round(time.monotonic() - started, 1),
            )
    finally:
        harness.close()
        stop_provider(process)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.late_effect", description=__doc__
    )
    parser.add_argument("--store", choices=("sqlite", "dynamodb"), default="sqlite")
    parser.add_argument("--code-dir", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv)
    node = None
    for number in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory() as folder:
            if args.store == "sqlite":
                store = StoreUnderTest.sqlite(Path(folder))
            else:
                from tests.support import ministack
                from tests.support.restart import _store

                node = node or ministack.start()
                store = _store("dynamodb", Path(folder), node.url)
            found = run_late_effect(store, Path(folder), args.code_dir)
            print(
                f"run {number} ({args.store}): status {found.status} "
                f"({found.reason_code}), provider effects {found.provider_effects}, "
                f"requests {found.provider_requests}, {found.seconds} s",
                flush=True,
            )
    if node is not None:
        node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
