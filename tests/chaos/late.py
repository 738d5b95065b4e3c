"""Executor calls that outlive their deadline, and effects that land after the
worker gave up (issue 14.2): the landing action and the check after every tick."""

from __future__ import annotations

import random
from typing import Any

from adapters.executors.fake import EffectLedger
from domain.services.execution import Worker
from tests.chaos.oracle import Oracle
from tests.chaos.wrappers import Landing
from tests.support.clocks import FixedClock
from tests.support.stream_checks import expect


def plant_old_lookup_rule() -> None:
    """Test-only switch: the rule before issue 14.1. A lookup's "not applied" is proof
    at once and recovery looks at lease expiry, while the call may still land."""
    from domain.attempt import ExecutionAttempt

    ExecutionAttempt.lookup_trusted_after = lambda self: None  # type: ignore[method-assign]


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
        if breach and request.spec.content.get("simulate") == "timeout_after_effect":
            # Past its window and answering "timed out" after applying: nobody can
            # ever learn of that effect; the contract exists to rule this out.
            breach = False
        if self.clock.now() >= landing.before and not breach:
            self.count("landing:never")
            return f"{request.attempt_id[:16]}: the abandoned call never landed"
        self.count("landing:after_window" if breach else "landing:abandoned")
        result: Any = None
        error: BaseException | None = None
        try:
            result = landing.executor.execute(request)
        except Exception as exc:
            error = exc
        if landing.generation is not None:
            # what the worker's bound does when an abandoned call answers after all
            self.workers[0].late_answer(request.attempt_id, landing.generation, result, error)
        answer = type(error).__name__ if error else "ok"
        return f"{request.attempt_id[:16]}: the abandoned call landed ({answer})"

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
        """No attempt is failed_safe while the provider holds an effect for its key (a
        success seen after "no effect" must have moved it to effect_after_no_effect)."""
        for attempt_id in self.attempts:
            summary = self.oracle.summaries.get(attempt_id)
            if summary is not None and summary.status == "failed_safe":
                expect(
                    self.effects.effect_count(summary.idempotency_key) == 0,
                    f"{attempt_id}: failed_safe while the provider holds an effect for its "
                    f"key (a late effect recorded as no effect)",
                )
