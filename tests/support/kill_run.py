"""The kill run: ``ledger serve`` SIGKILLed again and again while approvals keep
coming, over the three delivery modes, against the reference provider (a
process of its own that counts effects per idempotency key).

One ``http`` executor build per delivery mode (``provider_idempotency``,
``correlation_lookup`` with a lookup by key, ``operator_reconciliation_only``).
A client approves tasks round robin over the three builds, each with one of the
provider's faults (none, an effect whose answer is lost, an effect whose answer
is lost and whose every re-send is refused with 401 or 422: a credential
rotated, a key the provider will not take again), while the server is killed
with SIGKILL at intervals and started again. Then the server runs until every
attempt is settled, and the run reports:

- approvals acknowledged (202) and those missing from the log afterwards;
- keys with more than one effect at the provider;
- attempts ``failed_safe`` whose key holds an effect (issue 26's first finding:
  a refusal of a re-send taken as proof of no write), and ``succeeded`` ones
  without an effect;
- attempts not settled in time.

    python -m tests.support.kill_run --store sqlite --kills 5 --approvals 60
    python -m tests.support.kill_run --code-dir DIR ...   # the servers run DIR's code
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from domain.attempt import ExecutionAttempt
from tests.support.http_approvals import approve_one, set_up_directory
from tests.support.provider_fixtures import Provider, start_provider, stop_provider
from tests.support.restart import Harness, StoreUnderTest

TOKEN_ENV = "TASKS_TOKEN"
MODES = {
    "tasks.idempotent": "provider_idempotency",
    "tasks.looked_up": "correlation_lookup",
    "tasks.reconciled": "operator_reconciliation_only",
}
FAULTS: tuple[dict[str, Any], ...] = (
    {},
    {"fault": "drop_after_effect"},
    {"fault": "drop_then_reject", "reject_status": 401},
    {"fault": "drop_then_reject", "reject_status": 422},
)
SETTLED = {"succeeded", "failed_safe", "outcome_unknown", "manually_resolved"}
SETTLE_SECONDS = 150.0


@dataclass
class KillRun:
    """What one run found (see the module docstring)."""

    store: str
    kills: int = 0
    acknowledged: dict[str, str] = field(default_factory=dict)  # attempt id -> capability
    unacknowledged: int = 0  # approvals whose answer a kill cut off
    errors: Counter[str] = field(default_factory=Counter)
    missing: list[str] = field(default_factory=list)
    unsettled: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    second_effects: list[str] = field(default_factory=list)  # attempt ids
    failed_safe_with_effect: list[str] = field(default_factory=list)
    succeeded_without_effect: list[str] = field(default_factory=list)

    def row(self) -> str:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
        return (
            f"| {self.store} | {self.kills} | {len(self.acknowledged)} | {len(self.missing)} | "
            f"{len(self.unsettled)} | {len(self.second_effects)} | "
            f"{len(self.failed_safe_with_effect)} | {len(self.succeeded_without_effect)} | "
            f"{statuses} |"
        )

    @property
    def clean(self) -> bool:
        return not (
            self.missing
            or self.unsettled
            or self.second_effects
            or self.failed_safe_with_effect
            or self.succeeded_without_effect
        )


HEADER = (
    "| store | kills | approvals acknowledged | lost | not settled | keys with a second "
    "effect | failed_safe with an effect | succeeded without one | statuses |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def executors_file(folder: Path, provider_url: str) -> Path:
    entries = []
    for capability, mode in MODES.items():
        lookup = (
            f'lookup_url = "{provider_url}/v1/by-key/{{idempotency_key}}"\n'
            if mode == "correlation_lookup"
            else ""
        )
        entries.append(
            f'[[http]]\ncapability = "{capability}"\ndelivery_mode = "{mode}"\n'
            f'url = "{provider_url}/v1/{{destination}}"\n{lookup}timeout_seconds = 3\n'
            f'headers = {{ Authorization = "env:{TOKEN_ENV}" }}\nreceipt = ["/id"]\n'
        )
    path = folder / "executors.toml"
    path.write_text("\n".join(entries))
    return path


def builds(harness: Harness) -> dict[str, str]:
    """capability -> build digest, as ``ledger executors`` prints them."""
    listed = harness.run("executors", execution=True)
    found = {}
    for line in listed.splitlines():
        fields = line.split()
        if len(fields) > 1 and fields[0] in MODES:
            found[fields[0]] = fields[1]
    assert set(found) == set(MODES), listed
    return found


class Load:
    """A client approving round robin over the builds and faults until stopped,
    through whichever server is up."""

    def __init__(self, found: KillRun, digests: dict[str, str], limit: int) -> None:
        self.found = found
        self.digests = digests
        self.limit = limit
        self.base = ""
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        kinds = itertools.cycle(itertools.product(MODES, FAULTS))
        for number in range(self.limit):
            capability, fault = next(kinds)
            while not self.stop.is_set():  # until this one is acknowledged
                with self.lock:
                    base = self.base
                try:
                    with httpx.Client(base_url=base, timeout=15) as client:
                        attempt_id = approve_one(
                            client,
                            number,
                            capability=capability,
                            build=self.digests[capability],
                            content=dict(fault),
                        )
                except (httpx.HTTPError, AssertionError) as exc:
                    # a kill cut this one off (or its answer): the next server gets a new one
                    self.found.unacknowledged += 1
                    self.found.errors[type(exc).__name__] += 1
                    self.stop.wait(0.3)
                    continue
                self.found.acknowledged[attempt_id] = capability
                break


def kill_run(
    store: StoreUnderTest,
    workdir: Path,
    *,
    kills: int = 3,
    approvals: int = 36,
    code_dir: Path | None = None,
    seconds_between_kills: float = 60.0,
    max_dispatches: int = 2,
) -> KillRun:
    """The run of the module docstring; the provider is started and stopped here."""
    token = "kill-run-" + os.urandom(8).hex()
    process, provider = start_provider(token)
    harness = Harness(store, workdir, code_dir)
    harness.extra_env = {
        "LEDGER_EXECUTORS_FILE": str(executors_file(workdir, provider.url)),
        TOKEN_ENV: f"Bearer {token}",
        "LEDGER_LEASE_SECONDS": "5",  # what a kill cut off is recovered soon
        "LEDGER_FAKE_EXECUTORS": "false",
        # A lost answer waits out a lease before each re-send: two dispatches are
        # the first and one re-send (the one a refusal answers), 5 s instead of 20.
        "LEDGER_MAX_DISPATCHES": str(max_dispatches),
    }
    found = KillRun(store.kind)
    try:
        with ThreadPoolExecutor(1) as pool:  # `ledger executors` while the server starts
            listing = pool.submit(builds, harness)
            server = harness.serve(execution=True)
            digests = listing.result()
        with httpx.Client(base_url=server.base, timeout=30) as client:
            set_up_directory(client, tuple((c, digests[c], m) for c, m in MODES.items()))
        load = Load(found, digests, approvals)
        load.base = server.base
        client_thread = threading.Thread(target=load.run, daemon=True)
        client_thread.start()
        for k in range(kills):
            # each kill lands mid-load: after its share of the approvals is
            # acknowledged (or after seconds_between_kills, whichever is first)
            due = (k + 1) * approvals // (kills + 1)
            deadline = time.monotonic() + seconds_between_kills
            while len(found.acknowledged) < due and time.monotonic() < deadline:
                if not client_thread.is_alive():
                    break
                load.stop.wait(0.05)
            if not client_thread.is_alive():
                break
            server.stop("sigkill")
            found.kills += 1
            server = harness.serve(execution=True)
            with load.lock:
                load.base = server.base
        client_thread.join(timeout=300)
        load.stop.set()
        client_thread.join(timeout=30)
        settle(found, store, provider)
        server.stop("graceful")
    finally:
        harness.close()
        stop_provider(process)
    return found


def settle(found: KillRun, store: StoreUnderTest, provider: Provider) -> None:
    """Wait (bounded) until every acknowledged attempt is settled, then judge them."""
    deadline = time.monotonic() + SETTLE_SECONDS
    with store.ledger() as ledger:
        while True:
            states = {a: ledger.store.get(ExecutionAttempt, a) for a in found.acknowledged}
            done = all(s is not None and s.status.value in SETTLED for s in states.values())
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        effects = provider.effects()
        for attempt_id, state in states.items():
            if state is None:
                found.missing.append(attempt_id)
                continue
            status = state.status.value
            found.statuses[status] += 1
            if status not in SETTLED:
                found.unsettled.append(attempt_id)
            count = effects.get(state.idempotency_key, 0)
            if count > 1:
                found.second_effects.append(attempt_id)
            if status == "failed_safe" and count:
                found.failed_safe_with_effect.append(attempt_id)
            if status == "succeeded" and not count:
                found.succeeded_without_effect.append(attempt_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.kill_run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--store", choices=("sqlite", "dynamodb"), default="sqlite")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--approvals", type=int, default=60)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--code-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    node = None
    print(HEADER, flush=True)
    clean = True
    try:
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                if args.store == "sqlite":
                    store = StoreUnderTest.sqlite(Path(folder))
                else:
                    from tests.support import ministack
                    from tests.support.restart import _store

                    node = node or ministack.start()
                    store = _store("dynamodb", Path(folder), node.url)
                found = kill_run(
                    store,
                    Path(folder),
                    kills=args.kills,
                    approvals=args.approvals,
                    code_dir=args.code_dir,
                )
                print(found.row(), flush=True)
                clean = clean and found.clean
    finally:
        if node is not None:
            node.stop()
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
