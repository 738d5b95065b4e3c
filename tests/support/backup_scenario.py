"""The steps around the backup procedure of docs/backup.md, for its test.

    python -m tests.support.backup_scenario approve --port N --per-mode 7
    python -m tests.support.backup_scenario checkpoint
    python -m tests.support.backup_scenario settle --attempts var/attempts.txt

``approve`` sets up the directory and approves ``per-mode`` attempts of each
fake delivery mode through a running ``ledger serve``, printing one
``<attempt id> <mode>`` line each. ``checkpoint`` writes an audit checkpoint
(as ``ledger serve`` does every interval) into ``LEDGER_AUDIT_CHECKPOINT_DIR``.
``wait`` waits until every listed attempt has ``--status`` (one of, comma
separated); ``settle`` waits until none is queued or executing and prints one
JSON line: status, reason and the fake provider's effects and calls per
attempt (the fakes keep them in a file beside the store).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import httpx

from adapters.executors.fake import FAKE_CAPABILITIES, FileEffectLedger, fake_build_digest
from adapters.executors.loader import fake_effects_path
from adapters.settings import load_settings
from domain.attempt import ExecutionAttempt

PENDING = ("queued", "executing")


def approve(port: int, per_mode: int) -> None:
    from tests.support.http_approvals import approve_one, set_up_directory

    builds = tuple(
        (capability, fake_build_digest(capability), mode.value)
        for capability, mode in FAKE_CAPABILITIES.items()
    )
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        set_up_directory(client, builds)
        n = 0
        for capability, mode in FAKE_CAPABILITIES.items():
            for _ in range(per_mode):
                n += 1
                print(approve_one(client, n, capability=capability), mode.value, flush=True)


def checkpoint() -> None:
    from adapters.audit.digests import write_checkpoint
    from adapters.bootstrap import build_ledger

    settings = load_settings()
    assert settings.audit_checkpoint_dir, "LEDGER_AUDIT_CHECKPOINT_DIR is not set"
    ledger = build_ledger(settings)
    try:
        path = write_checkpoint(settings, ledger.store, ledger.clock, settings.audit_checkpoint_dir)
    finally:
        ledger.close()
    print(path)


def _attempts(listing: str) -> list[tuple[str, str]]:
    rows = [line.split() for line in Path(listing).read_text().splitlines() if line.strip()]
    return [(row[0], row[1]) for row in rows]


def _statuses(ids: list[str]) -> dict[str, ExecutionAttempt]:
    from adapters.bootstrap import build_ledger

    ledger = build_ledger(load_settings())
    try:
        found = {a: ledger.store.get(ExecutionAttempt, a) for a in ids}
    finally:
        ledger.close()
    return {a: x for a, x in found.items() if x is not None}


def wait(listing: str, wanted: set[str], seconds: float) -> None:
    ids = [a for a, _ in _attempts(listing)]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = _statuses(ids)
        if len(found) == len(ids) and all(x.status.value in wanted for x in found.values()):
            return
        time.sleep(0.5)
    raise SystemExit(f"not every attempt reached {sorted(wanted)} in {seconds} s")


def settle(listing: str, seconds: float) -> None:
    rows = _attempts(listing)
    ids = [a for a, _ in rows]
    deadline = time.monotonic() + seconds
    found = _statuses(ids)
    while time.monotonic() < deadline and any(x.status.value in PENDING for x in found.values()):
        time.sleep(0.5)
        found = _statuses(ids)
    path = fake_effects_path(load_settings())
    assert path is not None
    effects = FileEffectLedger(path)
    try:
        report = {
            attempt_id: {
                "mode": mode,
                "status": found[attempt_id].status.value,
                "reason": (found[attempt_id].result or {}).get("reason_code"),
                "effects": effects.effect_count(found[attempt_id].idempotency_key),
                "calls": sum(
                    1 for _, key in effects.calls if key == found[attempt_id].idempotency_key
                ),
            }
            for attempt_id, mode in rows
        }
    finally:
        effects.close()
    print(json.dumps(report, sort_keys=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.backup_scenario")
    steps = parser.add_subparsers(dest="step", required=True)
    approving = steps.add_parser("approve")
    approving.add_argument("--port", type=int, required=True)
    approving.add_argument("--per-mode", type=int, default=7)
    steps.add_parser("checkpoint")
    waiting = steps.add_parser("wait")
    waiting.add_argument("--attempts", required=True)
    waiting.add_argument("--status", required=True)
    waiting.add_argument("--seconds", type=float, default=60)
    settling = steps.add_parser("settle")
    settling.add_argument("--attempts", required=True)
    settling.add_argument("--seconds", type=float, default=120)
    args = parser.parse_args(argv)
    if args.step == "approve":
        approve(args.port, args.per_mode)
    elif args.step == "checkpoint":
        checkpoint()
    elif args.step == "wait":
        wait(args.attempts, set(args.status.split(",")), args.seconds)
    else:
        settle(args.attempts, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
