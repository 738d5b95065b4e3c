"""Executor calls that outlive their deadline, and effects that land after the
worker gave up (issue 14.2): the landing action and the check after every tick
that no attempt settled as "no effect" hides an effect the provider holds (a late
landing, or a re-send refused after an earlier dispatch landed: issue 26.1)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from adapters.executors.fake import EffectLedger
from adapters.store import LedgerStore
from domain.ports import ExecutionRequest
from domain.services.execution import Worker
from projections.audit import event_type
from tests.chaos.interleave import Actor
from tests.chaos.oracle import Oracle
from tests.chaos.wrappers import Landing
from tests.support.clocks import FixedClock
from tests.support.stream_checks import Violation

# Answers that, after applying the effect, say "timed out": past the settle window
# nobody can ever learn of such an effect (the executor contract rules it out).
LOST_ANSWER = frozenset({"timeout_after_effect", "resend_rejected", "resend_key_reused"})


def plant_old_lookup_rule() -> None:
    """Test-only switch: the rule before issue 14.1. A lookup's "not applied" is proof
    at once and recovery looks at lease expiry, while the call may still land."""
    from domain.attempt import ExecutionAttempt

    ExecutionAttempt.lookup_trusted_after = lambda self: None  # type: ignore[method-assign]


def plant_resend_no_write_proof() -> None:
    """Test-only switch: the rule before issue 26.1. A re-send's "nothing was written"
    (a 401 after a credential rotation, a reused key's 422) proves no effect, although
    an earlier dispatch whose answer was lost may have landed."""
    from domain.attempt import ExecutionAttempt

    ExecutionAttempt.no_write_is_proof = property(lambda self: True)  # type: ignore[method-assign,assignment]


class LateEffects:
    """Mixed into :class:`~tests.chaos.sim.Simulation`."""

    # provided by the simulation
    rng: random.Random
    clock: FixedClock
    effects: EffectLedger
    oracle: Oracle
    workers: list[Worker]
    attempts: list[str]
    landings: list[Landing]
    overdue: list[Landing]
    main_action: str
    admin_saw: dict[str, int]  # attempt -> effects the admin saw before resolving no_effect
    unseen: set[str]  # keys with an effect whose answer the ledger can never get
    counts: dict[str, int]
    reporting: set[str]  # keys whose landed call is still reporting its answer
    actors: list[Actor]
    store: LedgerStore

    def count(self, name: str) -> None:
        raise NotImplementedError

    def note(self, text: str) -> None:
        raise NotImplementedError

    def check(self) -> None:
        raise NotImplementedError

    def do_land(self) -> str | None:
        """The provider finishes a call its worker gave up on (the abandoned thread).

        One whose settle window has passed waits for the end of the run, where it
        either never lands or breaks the contract (``land_the_rest``).
        """
        landing = self.landings.pop(self.rng.randrange(len(self.landings)))
        if self.clock.now() >= landing.before:
            self.overdue.append(landing)
            return f"{landing.request.attempt_id[:16]}: past its settle window"
        return self.land(landing)

    def land(self, landing: Landing, *, breach: bool = False) -> str:
        """Land an abandoned call's effect, if its settle window is still open.

        ``breach``: an executor that breaks its contract and lands after the window;
        what it answers must still reach the attempt (never kept silently).
        """
        request = landing.request
        if breach and request.spec.content.get("simulate") in LOST_ANSWER:
            # Past its window and answering "timed out" after applying: nobody can
            # ever learn of that effect; the contract exists to rule this out.
            breach = False
        if self.clock.now() >= landing.before and not breach:
            self.count("landing:never")
            return f"{request.attempt_id[:16]}: the abandoned call never landed"
        self.count("landing:after_window" if breach else "landing:abandoned")
        result: Any = None
        error: BaseException | None = None
        key = request.idempotency_key
        self.reporting.add(key)  # until its answer has reached the attempt (or failed to)
        try:
            try:
                result = self.watch_landing(
                    request,
                    lambda: landing.executor.execute(request),
                    observed=landing.generation is not None,
                )
            except Exception as exc:
                error = exc
            if landing.generation is not None:
                self.report_late(request, landing.generation, result, error)
        finally:
            self.reporting.discard(key)
        answer = type(error).__name__ if error else "ok"
        return f"{request.attempt_id[:16]}: the abandoned call landed ({answer})"

    def report_late(
        self, request: ExecutionRequest, generation: int, result: Any, error: BaseException | None
    ) -> None:
        """What the worker's bound does when an abandoned call answers after all.

        It writes an observation in the background and drops it if the store fails
        (a known gap: nothing retries it, and a settled attempt is never looked at
        again); a success lost to an injected fault is counted and treated as unseen.
        """
        before = self._observations(request.attempt_id, generation), self._faults()
        self.workers[0].late_answer(request.attempt_id, generation, result, error)
        after = self._observations(request.attempt_id, generation), self._faults()
        if error is None and after[0] == before[0] and after[1] > before[1]:
            self.count("landing:observation_lost")
            self.unseen.add(request.idempotency_key)

    def _faults(self) -> int:
        return sum(n for name, n in self.counts.items() if name.startswith("fault:"))

    def _observations(self, attempt_id: str, generation: int) -> int:
        kinds = ("LateResultObserved", "EffectAfterNoEffect")
        found = 0
        for event in self.store.events(attempt_id):
            data = event.data()  # type: ignore[attr-defined]
            if event_type(event) in kinds and data.get("generation") == generation:  # type: ignore[arg-type]
                found += 1
        return found

    def watch_landing(
        self, request: ExecutionRequest, call: Callable[[], Any], *, observed: bool
    ) -> Any:
        """Run a call that lands after its worker stopped waiting. An effect it applies
        while answering "timed out", or with nobody to tell (``observed`` False), is one
        the ledger can never learn of: noted, so the check below does not count it."""
        key = request.idempotency_key
        before = self.effects.effect_count(key)
        try:
            result = call()
        except Exception:
            if self.effects.effect_count(key) > before:
                self.unseen.add(key)
            raise
        if not observed and self.effects.effect_count(key) > before:
            self.unseen.add(key)
        return result

    def land_the_rest(self) -> None:
        """Calls abandoned at the end land now, in a seeded order, or never; with no
        faults armed any more, half of those past their window land anyway (a broken
        executor contract), and the late success must flag a "no effect" attempt."""
        self.main_action = "land"
        self.landings.extend(self.overdue)
        self.overdue.clear()
        while self.landings:
            landing = self.landings.pop(self.rng.randrange(len(self.landings)))
            late = self.clock.now() >= landing.before
            self.note(self.land(landing, breach=late and self.rng.random() < 0.5))
            self.check()

    def check_no_late_effect_lost(self) -> None:
        """No attempt settled as "no effect" while the provider holds an effect for its
        key, unless it was flagged ``effect_after_no_effect``.

        ``failed_safe`` never may (a late effect, or a refused re-send after an earlier
        dispatch landed, recorded as no effect). ``manually_resolved(no_effect)`` is an
        admin's word: wrong when the admin saw the effect before resolving, or when it
        landed later with an answer nobody could get; any other effect must have
        reached the attempt and flagged it.
        """
        # Keys whose late call has landed and whose answer is still on its way.
        on_the_way = self.reporting | {a.late_key for a in self.actors if not a.done}
        for attempt_id in self.attempts:
            summary = self.oracle.summaries.get(attempt_id)
            if summary is None or not summary.settled_no_effect:
                continue
            key = summary.idempotency_key
            if self.effects.effect_count(key) == 0:
                continue
            if summary.status == "failed_safe":
                raise Violation(
                    f"{attempt_id}: failed_safe while the provider holds an effect for its "
                    f"key (a late effect, or a refused re-send, recorded as no effect)"
                )
            if key in on_the_way:
                continue
            if self.admin_saw.get(attempt_id, 0) == 0 and key not in self.unseen:
                raise Violation(
                    f"{attempt_id}: resolved no_effect while the provider holds an effect "
                    f"for its key that landed afterwards and was never flagged"
                )
