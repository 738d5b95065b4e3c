"""``ledger demo``: a narrated end-to-end story on a throwaway embedded store.

Propose, present, approve twice, execute; then a lost response in each
delivery mode, recovery, and an admin resolution. It drives the in-process
API (the same service functions as HTTP) on a ledger of ``api.testing``,
whose clock and worker the story moves by hand.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from adapters.executors.fake import FAKE_CAPABILITIES
from api.embedded import Principal, Role
from api.testing import SteppedLedger, open_test_ledger
from domain.attempt import ExecutionAttempt
from domain.services.approval import Provenance
from domain.spec import sha256_tag

# What the demo's assistant binds into its specs besides the build's own digests:
# its build, and the policy set it evaluated under (reserved, design.md 2.1).
PLUGIN_BUILD = sha256_tag(b"ledger demo assistant 1")
POLICY_DIGEST = sha256_tag(b"ledger demo: no policy set")
WHO = Provenance("alice", "ib-alice-chat", "cb-kitchen", "conversation-42")
ADMIN = Principal(subject="admin-demo", role=Role.ADMIN)


def _spec(ledger: SteppedLedger, capability: str, title: str, simulate: str) -> dict[str, Any]:
    spec = ledger.fake_spec(
        capability, simulate=simulate, content={"title": title}, permission="demo.execute"
    )
    spec.update(plugin_build=PLUGIN_BUILD, policy_digest=POLICY_DIGEST)
    spec["sources"] = ["message:demo"]
    return spec


def _directory(ledger: SteppedLedger) -> None:
    ledger.put_actor("alice", enabled=True)
    ledger.put_identity_binding(
        WHO.identity_binding_id, actor_id="alice", channel="chat", external_id="alice@chat"
    )
    ledger.put_channel_binding(
        WHO.channel_binding_id, conversation_key=WHO.conversation_key, channel="chat"
    )
    ledger.put_grant("alice", "demo.execute")
    # the fake executor builds are allowed already (``api.testing``)


def _present(ledger: SteppedLedger, proposal_id: str) -> str:
    return ledger.present(
        proposal_id,
        version=1,
        identity_binding_id=WHO.identity_binding_id,
        channel_binding_id=WHO.channel_binding_id,
        conversation_key=WHO.conversation_key,
    ).token


def _approved(
    ledger: SteppedLedger,
    capability: str,
    title: str,
    simulate: str,
    say: Any,
    *,
    twice: bool = False,
) -> str:
    proposal = ledger.propose("alice", _spec(ledger, capability, title, simulate))
    say(
        f"proposed [bold]{title}[/] via {capability}: version {proposal.version}, "
        f"payload {proposal.payload_hash[:19]}..."
    )
    first = _present(ledger, proposal.proposal_id)
    if not twice:
        return str(ledger.approve(first, provenance=WHO).attempt_id)
    second = _present(ledger, proposal.proposal_id)
    say(
        "presented it twice (two single-use presentations; tokens are shown once, stored as hashes)"
    )
    a = ledger.approve(first, provenance=WHO)
    b = ledger.approve(second, provenance=WHO)
    say(
        f"approved through both presentations -> one attempt: {a.attempt_id == b.attempt_id} "
        f"({str(a.attempt_id)[:16]}..., {a.status})"
    )
    return str(a.attempt_id)


def run_demo(console: Console | None = None, directory: Path | None = None) -> dict[str, str]:
    """Tell the story; returns the final status per attempt label."""
    out = console or Console()

    def say(text: str) -> None:
        out.print("  " + text)

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(directory or scratch) / "demo.db"
        with open_test_ledger(
            store="sqlite", sqlite_path=str(path), env="development", lease_seconds=30
        ) as ledger:
            return _story(ledger, out, say)


def _story(ledger: SteppedLedger, out: Console, say: Any) -> dict[str, str]:
    out.rule("1. The directory")
    _directory(ledger)
    say(
        "alice is enabled, bound to one chat identity and one conversation, "
        "and granted demo.execute; three fake executor builds are available"
    )

    out.rule("2. Propose, present, approve twice, execute")
    happy = _approved(ledger, "fake.provider_idempotency", "Buy milk", "success", say, twice=True)
    say(
        f"worker: {ledger.process(happy).value}; a duplicate delivery: "
        f"{ledger.process(happy).value}"
    )

    out.rule("3. A lost response in each delivery mode")
    lost: dict[str, str] = {}
    for capability in FAKE_CAPABILITIES:
        attempt_id = _approved(
            ledger, capability, f"Lost reply ({capability})", "timeout_after_effect", say
        )
        lost[capability] = attempt_id
        say(
            f"worker: the provider applied it but the reply was lost -> "
            f"{ledger.process(attempt_id).value}"
        )

    out.rule("4. Recovery after the leases expire")
    ledger.advance(ledger.wiring.settings.lease_seconds + 1)
    report = ledger.recover()
    say(f"recovery examined {report.examined} due entries: {dict(report.outcomes)}")
    say(
        "provider_idempotency retried with the same key (the provider replayed its receipt); "
        "correlation_lookup looked it up read-only; operator_only went to a human"
    )

    out.rule("5. An admin resolves the uncertain one")
    unknown = ledger.status(lost["fake.operator_only"])
    resolved = ledger.acting_as(ADMIN).resolve(
        unknown.attempt_id,
        expected_revision=unknown.revision,
        resolution="effect_applied",
        reason="Provider dashboard shows the task",
    )
    say(f"resolved as effect_applied -> {resolved.status}; the executor was not called")

    out.rule("Final statuses")
    labels = {"happy path": happy, **{f"lost reply, {c}": a for c, a in lost.items()}}
    table = Table("attempt", "status", "result", "effects for its key", "executor calls")
    final: dict[str, str] = {}
    effects = ledger.effects
    for label, attempt_id in labels.items():
        # the aggregate itself: the idempotency key and the result's source are
        # not in the redacted status view
        attempt = ledger.wiring.store.get(ExecutionAttempt, attempt_id)
        assert attempt is not None
        key = attempt.idempotency_key
        calls = sum(1 for _, k in effects.calls if k == key)
        result = attempt.result or {}
        detail = result.get("source", "") if attempt.resolution is None else "admin"
        table.add_row(
            label, attempt.status.value, detail, str(effects.effect_count(key)), str(calls)
        )
        final[label] = attempt.status.value
    out.print(table)
    say(f"no idempotency key has more than one effect: {effects.max_effects_per_key() <= 1}")
    return final
