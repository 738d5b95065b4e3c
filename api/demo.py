"""``ledger demo``: a narrated end-to-end story on a throwaway embedded store.

Propose, present, approve twice, execute; then a lost response in each
delivery mode, recovery, and an admin resolution. Uses the same services the
API and the worker use, with a clock the story moves by hand.
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from adapters.bootstrap import Ledger, build_ledger
from adapters.executors.fake import FAKE_CAPABILITIES, fake_build_digest
from adapters.runtime import make_worker
from adapters.settings import load_settings
from adapters.system import ManualClock
from domain.attempt import ExecutionAttempt
from domain.directory import (
    DirectoryKind,
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
)
from domain.services.approval import Provenance, approve
from domain.services.directory import put_record
from domain.services.proposals import present, propose
from domain.services.recovery import run_recovery
from domain.services.resolution import resolve

DIGEST = "sha256:" + "5e" * 32
WHO = Provenance("alice", "ib-alice-chat", "cb-kitchen", "conversation-42")


def _spec(clock: ManualClock, capability: str, title: str, simulate: str) -> dict[str, Any]:
    return {
        "capability": capability,
        "executor_build": fake_build_digest(capability),
        "plugin_build": DIGEST,
        "schema_digest": DIGEST,
        "policy_digest": DIGEST,
        "permission": "demo.execute",
        "effect": "create",
        "destination": "tasks",
        "content": {"title": title, "simulate": simulate},
        "sources": ["message:demo"],
        "expires_at": (clock.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _directory(ledger: Ledger) -> None:
    store, clock = ledger.store, ledger.clock
    put_record(
        store,
        clock,
        kind=DirectoryKind.ACTOR,
        record_id=actor_record_id("alice"),
        values={"enabled": True},
    )
    put_record(
        store,
        clock,
        kind=DirectoryKind.IDENTITY_BINDING,
        record_id=identity_binding_record_id(WHO.identity_binding_id),
        values={
            "actor_id": "alice",
            "channel": "chat",
            "external_id": "alice@chat",
            "active": True,
        },
    )
    put_record(
        store,
        clock,
        kind=DirectoryKind.CHANNEL_BINDING,
        record_id=channel_binding_record_id(WHO.channel_binding_id),
        values={"conversation_key": WHO.conversation_key, "channel": "chat", "active": True},
    )
    put_record(
        store,
        clock,
        kind=DirectoryKind.PERMISSION_GRANT,
        record_id=grant_record_id("alice", "demo.execute"),
        values={"granted": True},
    )
    for capability, mode in FAKE_CAPABILITIES.items():
        put_record(
            store,
            clock,
            kind=DirectoryKind.EXECUTOR_BUILD,
            record_id=executor_build_record_id(capability, fake_build_digest(capability)),
            values={"delivery_mode": mode.value, "available": True},
        )


def _approved(
    ledger: Ledger,
    clock: ManualClock,
    capability: str,
    title: str,
    simulate: str,
    say: Any,
    *,
    twice: bool = False,
) -> str:
    ctx = ledger.context
    proposal = propose(ctx, actor_id="alice", spec_data=_spec(clock, capability, title, simulate))
    say(
        f"proposed [bold]{title}[/] via {capability}: version {proposal.version}, "
        f"payload {proposal.payload_hash[:19]}..."
    )
    first = present(
        ctx,
        proposal_id=proposal.proposal_id,
        version=1,
        identity_binding_id=WHO.identity_binding_id,
        channel_binding_id=WHO.channel_binding_id,
        conversation_key=WHO.conversation_key,
    )
    if not twice:
        return approve(ctx, token=first.token, provenance=WHO).attempt_id
    second = present(
        ctx,
        proposal_id=proposal.proposal_id,
        version=1,
        identity_binding_id=WHO.identity_binding_id,
        channel_binding_id=WHO.channel_binding_id,
        conversation_key=WHO.conversation_key,
    )
    say("presented it twice (two single-use controls; tokens are shown once, stored as hashes)")
    a = approve(ctx, token=first.token, provenance=WHO)
    b = approve(ctx, token=second.token, provenance=WHO)
    say(
        f"approved through both controls -> one attempt: {a.attempt_id == b.attempt_id} "
        f"({a.attempt_id[:16]}..., {a.status})"
    )
    return a.attempt_id


def run_demo(console: Console | None = None, directory: Path | None = None) -> dict[str, str]:
    """Tell the story; returns the final status per attempt label."""
    out = console or Console()

    def say(text: str) -> None:
        out.print("  " + text)

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(directory or scratch) / "demo.db"
        clock = ManualClock()
        settings = load_settings(
            store="sqlite", sqlite_path=str(path), env="development", lease_seconds=30
        )
        ledger = build_ledger(settings, clock=clock)
        try:
            return _story(ledger, clock, out, say)
        finally:
            ledger.close()


def _story(ledger: Ledger, clock: ManualClock, out: Console, say: Any) -> dict[str, str]:
    worker = make_worker(ledger)
    assert ledger.effects is not None
    out.rule("1. The directory")
    _directory(ledger)
    say(
        "alice is enabled, bound to one chat identity and one conversation, "
        "and granted demo.execute; three fake executor builds are available"
    )

    out.rule("2. Propose, present, approve twice, execute")
    happy = _approved(
        ledger, clock, "fake.provider_idempotency", "Buy milk", "success", say, twice=True
    )
    say(
        f"worker: {worker.process(happy).value}; a duplicate delivery: "
        f"{worker.process(happy).value}"
    )

    out.rule("3. A lost response in each delivery mode")
    lost: dict[str, str] = {}
    for capability in FAKE_CAPABILITIES:
        attempt_id = _approved(
            ledger, clock, capability, f"Lost reply ({capability})", "timeout_after_effect", say
        )
        lost[capability] = attempt_id
        say(
            f"worker: the provider applied it but the reply was lost -> "
            f"{worker.process(attempt_id).value}"
        )

    out.rule("4. Recovery after the leases expire")
    clock.advance(ledger.settings.lease_seconds + 1)
    report = run_recovery(worker)
    say(f"recovery examined {report.examined} due entries: {dict(report.outcomes)}")
    say(
        "provider_idempotency retried with the same key (the provider replayed its receipt); "
        "correlation_lookup looked it up read-only; operator_only went to a human"
    )

    out.rule("5. An admin resolves the uncertain one")
    unknown = ledger.store.get(ExecutionAttempt, lost["fake.operator_only"])
    assert unknown is not None
    resolved = resolve(
        ledger.context,
        attempt_id=unknown.id,
        expected_revision=unknown.revision,
        outcome="effect_applied",
        reason="Provider dashboard shows the task",
        resolved_by="admin-demo",
    )
    say(f"resolved as effect_applied -> {resolved.status.value}; the executor was not called")

    out.rule("Final statuses")
    labels = {"happy path": happy, **{f"lost reply, {c}": a for c, a in lost.items()}}
    table = Table("attempt", "status", "result", "effects for its key", "executor calls")
    final: dict[str, str] = {}
    for label, attempt_id in labels.items():
        attempt = ledger.store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None
        key = attempt.idempotency_key
        calls = sum(1 for _, k in ledger.effects.calls if k == key)
        result = attempt.result or {}
        detail = result.get("source", "") if attempt.resolution is None else "admin"
        table.add_row(
            label, attempt.status.value, detail, str(ledger.effects.effect_count(key)), str(calls)
        )
        final[label] = attempt.status.value
    out.print(table)
    say(f"no idempotency key has more than one effect: {ledger.effects.max_effects_per_key() <= 1}")
    return final
