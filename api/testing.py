"""A ledger for tests: ``from api.testing import open_test_ledger``.

In memory by default, on a clock that moves only when the test moves it
(``ledger.advance(seconds)``), with the fake executors registered and their
builds already allowed in the directory. No background loop runs: the test
runs the worker when it wants, one attempt at a time (``process``), one
recovery tick (``recover``), or until nothing is due (``run_until_idle``,
which can also move the clock to each next due time: lease expiries,
backoffs). Everything else is the in-process API (``api.embedded``), so a
test drives the very service functions the HTTP API calls.

The fakes' behaviour comes from the spec's ``content["simulate"]``
(``success``, ``no_write_error``, ``timeout_before_effect``,
``timeout_after_effect``, ``unsafe_receipt``, ``slow``, ``lookup_unknown``);
``ledger.effects`` counts their calls and effects per idempotency key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.bootstrap import build_ledger
from adapters.executors.fake import EffectLedger, FileEffectLedger
from adapters.runtime import Runtime, subscriber_runs
from adapters.settings import load_settings
from adapters.system import ManualClock
from api.embedded.ledger import DEFAULT_SUBJECT, EmbeddedLedger
from domain.ports import TokenSource
from domain.services.approval import Provenance
from domain.services.execution import Worker
from domain.services.recovery import ERROR, RecoveryReport, run_recovery
from domain.services.worker_policy import Outcome
from domain.spec import sha256_tag
from domain.timeutil import format_utc

__all__ = ["IdleReport", "SteppedLedger", "open_test_ledger"]

DIGEST = "sha256:" + "0" * 64
"""The build and schema digests of a capability no registered build has (refused)."""
PLUGIN_BUILD = sha256_tag(b"api.testing fake_spec 1")
"""The proposing assistant's build that ``fake_spec`` names (design.md 2.1)."""
POLICY_DIGEST = sha256_tag(b"api.testing: no policy set")
"""The policy set ``fake_spec`` names: reserved, any well-formed value is accepted."""
IDLE = frozenset({Outcome.SKIPPED.value, Outcome.MISSING.value, ERROR})
"""Recovery outcomes that change nothing: no further tick can move the attempt."""
HORIZON = timedelta(days=3650)


@dataclass
class IdleReport:
    """What :meth:`SteppedLedger.run_until_idle` did: recovery ticks run, the
    worker's outcomes by name, and how far the clock was moved."""

    ticks: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    advanced_seconds: float = 0.0


class SteppedLedger(EmbeddedLedger):
    """An embedded ledger whose clock and worker move only when the test moves them."""

    def __init__(self, clock: ManualClock, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self._worker: Worker | None = None
        self._runtime: Runtime | None = None

    @property
    def effects(self) -> EffectLedger | FileEffectLedger:
        """Calls and effects of the fake executors, by idempotency key."""
        effects = self.wiring.effects
        if effects is None:
            raise RuntimeError("the fake executors are off (LEDGER_FAKE_EXECUTORS=false)")
        return effects

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.clock.advance(seconds)

    @property
    def worker(self) -> Worker:
        """The worker, with the policy the settings describe."""
        if self._worker is None:
            self._worker = self.wiring.make_worker()
        return self._worker

    def process(self, attempt_id: str) -> Outcome:
        """Deliver one attempt to the worker (as the store's feed would), then project."""
        outcome = self.worker.process(attempt_id)
        self.project()
        return outcome

    def recover(self) -> RecoveryReport:
        """One recovery tick over what is due now, then project."""
        report = run_recovery(self.worker)
        self.project()
        return report

    def project(self) -> None:
        """Run every subscriber of the log (status and inbox projections,
        webhook notifiers) until it has caught up."""
        if self._runtime is None:
            self._runtime = Runtime(
                self.wiring,
                None,
                recovery_interval=self.wiring.settings.recovery_interval_seconds,
                subscribers=subscriber_runs(self.wiring),
            )
        for run in self._runtime.subscribers:
            while self._runtime.run_subscriber_once(run):
                pass

    def run_until_idle(self, *, advance_clock: bool = False, max_ticks: int = 1000) -> IdleReport:
        """Run recovery ticks until one changes nothing (queued attempts are
        leased and executed; expired leases follow their delivery mode).

        With ``advance_clock`` the clock then moves to the next due time and the
        ticks go on, until nothing is due at any time. Raises ``RuntimeError``
        after ``max_ticks`` (work that never settles)."""
        report = IdleReport()
        while report.ticks < max_ticks:
            tick = self.recover()
            report.ticks += 1
            report.outcomes.update(tick.outcomes)
            if any(outcome not in IDLE for outcome in tick.outcomes):
                continue
            due = self.next_due() if advance_clock else None
            if due is None:
                return report
            seconds = (due - self.clock.now()).total_seconds()
            self.advance(seconds)
            report.advanced_seconds += seconds
        raise RuntimeError(f"work is still due after {max_ticks} recovery ticks")

    def next_due(self) -> datetime | None:
        """The soonest due-work time after now (None: nothing is waiting for time)."""
        now = self.clock.now()
        cursor: str | None = None
        soonest: datetime | None = None
        while True:
            page = self.wiring.store.due_work(now + HORIZON, 100, cursor)
            for item in page.items:
                at = item.next_action_at
                if at is not None and at > now and (soonest is None or at < soonest):
                    soonest = at
            if page.cursor is None:
                return soonest
            cursor = page.cursor

    def add_approver(
        self,
        actor_id: str = "alice",
        *,
        permissions: Iterable[str] = ("tasks.write",),
        channel: str = "chat",
        conversation_key: str | None = None,
    ) -> Provenance:
        """An enabled actor with one identity binding, one channel binding and
        the permissions named; returns the provenance its channel approves with."""
        who = Provenance(
            actor_id=actor_id,
            identity_binding_id=f"ib-{actor_id}",
            channel_binding_id=f"cb-{actor_id}",
            conversation_key=conversation_key or f"conv-{actor_id}",
        )
        self.put_actor(actor_id, enabled=True)
        self.put_identity_binding(
            who.identity_binding_id,
            actor_id=actor_id,
            channel=channel,
            external_id=f"{actor_id}@{channel}",
        )
        self.put_channel_binding(
            who.channel_binding_id, conversation_key=who.conversation_key, channel=channel
        )
        for permission in permissions:
            self.put_grant(actor_id, permission)
        return who

    def fake_spec(
        self,
        capability: str = "fake.provider_idempotency",
        *,
        simulate: str = "success",
        content: Mapping[str, Any] | None = None,
        permission: str = "tasks.write",
        expires_in: float = 86400,
        **changes: Any,
    ) -> dict[str, Any]:
        """A valid spec for a registered fake executor build (wire format)."""
        builds = {e.capability: e for e in self.executors()}
        build = builds.get(capability)
        spec: dict[str, Any] = {
            "capability": capability,
            "executor_build": build.build_digest if build else DIGEST,
            "plugin_build": PLUGIN_BUILD,
            "schema_digest": build.schema_digest if build else DIGEST,
            "policy_digest": POLICY_DIGEST,
            "permission": permission,
            "effect": "create",
            "destination": "tasks",
            "content": {"title": "Buy milk", **(content or {}), "simulate": simulate},
            "sources": ["message:test"],
            "expires_at": format_utc(self.clock.now() + timedelta(seconds=expires_in)),
        }
        spec.update(changes)
        return spec

    def approved(self, who: Provenance, spec: Mapping[str, Any]) -> str:
        """Propose ``spec`` for ``who``, present it to ``who`` and approve it;
        the attempt id (queued, not executed yet)."""
        proposal = self.propose(who.actor_id, spec)
        presentation = self.present(
            proposal.proposal_id,
            version=proposal.version,
            identity_binding_id=who.identity_binding_id,
            channel_binding_id=who.channel_binding_id,
            conversation_key=who.conversation_key,
        )
        attempt_id = self.approve(presentation.token, provenance=who).attempt_id
        assert attempt_id is not None  # a single approval always queues its attempt
        return attempt_id


def open_test_ledger(
    *,
    start_at: datetime | None = None,
    tokens: TokenSource | None = None,
    subject: str = DEFAULT_SUBJECT,
    **settings: Any,
) -> SteppedLedger:
    """A :class:`SteppedLedger`: in memory (``store="sqlite", sqlite_path=...``
    for a file), ``env="test"``, its clock at ``start_at`` (now, to the second,
    by default), the fake executors registered and allowed in the directory.

    Use it as a context manager (it closes the store on exit; it never starts
    background loops) or call ``close()``."""
    clock = ManualClock((start_at or datetime.now(UTC)).replace(microsecond=0))
    wiring = build_ledger(
        load_settings(**{"store": "memory", "env": "test", **settings}),
        clock=clock,
        tokens=tokens,
    )
    ledger = SteppedLedger(clock, wiring=wiring, subject=subject, start=False)
    try:
        for entry in ledger.executors():
            if entry.kind == "fake":
                ledger.put_executor_build(
                    entry.capability, entry.build_digest, delivery_mode=entry.delivery_mode
                )
    except BaseException:
        ledger.close()
        raise
    return ledger
