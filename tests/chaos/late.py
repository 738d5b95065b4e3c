"""Executor calls that outlive their deadline, and effects that land after the
worker gave up (issue 14.2): the landing action and the check after every tick
that no attempt settled as "no effect" hides an effect the provider holds (a late
landing, or a re-send refused after an earlier dispatch landed: issue 26.1).

And the class of issue 25.3: the provider applies after the client gave up, past
the build's settle window, and its answer is lost. Nothing reports it; only a
later read-only lookup can find it, so a ``correlation_lookup`` attempt settled
"no effect" must be flagged by the watch (I12) before its plan of looks ends. An
effect that lands once nothing can look again any more is beyond the watch."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from adapters.executors.fake import EffectLedger
from adapters.store import LedgerStore
from domain.directory import DeliveryMode
from domain.ports import ExecutionRequest
from domain.services.execution import Worker
from domain.services.recovery import run_recovery
from projections.audit import event_type
from tests.chaos.interleave import Actor
from tests.chaos.oracle import Oracle
from tests.chaos.world import WATCH
from tests.chaos.wrappers import Landing
from tests.support.clocks import FixedClock
from tests.support.stream_checks import AttemptSummary, Violation, expect

# Answers that, after applying the effect, say "timed out": past the settle window
# nobody can ever learn of such an effect (the executor contract rules it out).
LOST_ANSWER = frozenset({"timeout_after_effect", "resend_rejected", "resend_key_reused"})


def plant_old_lookup_rule() -> None:
    """Test-only switch: the rule before issue 14.1. A lookup's "not applied" is proof
    at once and recovery looks at lease expiry, while the call may still land."""
    from domain.attempt import ExecutionAttempt

    ExecutionAttempt.lookup_trusted_after = lambda self: None  # type: ignore[method-assign]


def plant_no_watch() -> None:
    """Test-only switch: the rule before issue 25.3. A lookup's "not applied" (and an
    admin's no_effect) is final: nothing ever looks again."""
    from domain.attempt import ExecutionAttempt
    from tests.support import stream_checks

    ExecutionAttempt.watch_plan = lambda self, plan: None  # type: ignore[method-assign]
    # the model of the stream would name it at once; leave it to the effect check
    stream_checks.check_watched = lambda *args: None


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
    watched: set[str]  # ... that a later lookup of the watch must find (I12)
    beyond_watch: set[str]  # ... that landed when nothing could look again
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

        One whose settle window has passed lands now unheard (the class of issue
        25.3) or waits: for a later pick, or for the end of the run, where it either
        never lands or breaks the contract (``land_the_rest``).
        """
        index = self.rng.randrange(len(self.landings) + len(self.overdue))
        if index < len(self.landings):
            landing = self.landings.pop(index)
        else:
            landing = self.overdue.pop(index - len(self.landings))
        if self.clock.now() >= landing.before:
            if self.rng.random() < 0.4:
                # The provider applies long after the client gave up; nobody hears of it.
                return self.land(landing, breach=True, lost=True)
            self.overdue.append(landing)  # it may still do so later
            return f"{landing.request.attempt_id[:16]}: past its settle window"
        return self.land(landing)

    def land(self, landing: Landing, *, breach: bool = False, lost: bool = False) -> str:
        """Land an abandoned call's effect, if its settle window is still open.

        ``breach``: an executor that breaks its contract and lands after the window;
        what it answers must still reach the attempt (never kept silently).
        ``lost``: its answer never reaches anyone (the connection is gone); so is the
        answer of one that says "timed out" after applying.
        """
        request = landing.request
        if breach and request.spec.content.get("simulate") in LOST_ANSWER:
            lost = True
        if self.clock.now() >= landing.before and not breach:
            self.count("landing:never")
            return f"{request.attempt_id[:16]}: the abandoned call never landed"
        if lost:
            return self.land_unheard(landing)
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
                try:
                    self.report_late(request, landing.generation, result, error)
                except BaseException:
                    # The report died with its worker (a crash at its commit): nobody
                    # can learn of that effect from its answer any more.
                    self.count("landing:answer_lost")
                    self.unseen.add(key)
                    raise
        finally:
            self.reporting.discard(key)
        answer = type(error).__name__ if error else "ok"
        return f"{request.attempt_id[:16]}: the abandoned call landed ({answer})"

    def land_unheard(self, landing: Landing) -> str:
        """The provider applies an abandoned call past its settle window and its answer
        is lost: only a later read-only lookup can find the effect (I12)."""
        request = landing.request
        key = request.idempotency_key
        before = self.effects.effect_count(key)
        with contextlib.suppress(Exception):  # whatever it answers, nobody hears it
            landing.executor.execute(request)
        if self.effects.effect_count(key) == before:
            self.count("landing:never")
            return f"{request.attempt_id[:16]}: the abandoned call applied nothing"
        self.count("landing:after_window_unheard")
        summary = self.oracle.summaries[request.attempt_id]
        if self.lookup_can_find(summary, request):
            self.watched.add(key)
            return f"{request.attempt_id[:16]}: landed past its window, unheard (watched)"
        self.count("landing:beyond_watch")
        self.unseen.add(key)
        self.beyond_watch.add(key)
        return f"{request.attempt_id[:16]}: landed past its window, unheard (beyond the watch)"

    def lookup_can_find(self, summary: AttemptSummary, request: ExecutionRequest) -> bool:
        """Whether the rule says a read-only lookup must still find an effect that lands
        now (judged from the stream and the policy, not from what the ledger plans):
        its mode has a lookup that can tell, and the attempt is not settled, or was
        settled "no effect" less than the watch's last look ago (I12)."""
        if summary.mode is not DeliveryMode.CORRELATION_LOOKUP:
            return False
        if request.spec.content.get("simulate") == "lookup_unknown":
            return False  # its lookups cannot tell
        if summary.status == "effect_after_no_effect":
            return False  # flagged already
        if not summary.settled_no_effect:
            return True
        # failed_safe by a lookup, or an admin's no_effect: both are watched
        assert summary.settled_at is not None
        return self.clock.now() < summary.settled_at + timedelta(seconds=WATCH[-1])

    def drain_watches(self) -> None:
        """After the drain: the clock moves past every watch plan and recovery takes the
        looks still due, so an effect the watch can find is found."""
        self.main_action = "recover"
        try:
            for _ in range(len(WATCH) + 2):
                if all(s.watch_due_at() is None for s in self.oracle.summaries.values()):
                    break
                self.clock.advance(WATCH[-1] + 1)
                report = run_recovery(self.workers[0])
                expect(not report.outcomes.get("error"), f"recovery raised: {report}")
                self.note(f"watch drain: recovery examined {report.examined}")
                self.check()
        finally:
            self.main_action = "checks"
        pending = [a for a, s in self.oracle.summaries.items() if s.watch_due_at() is not None]
        expect(not pending, f"{pending[:3]}: watch looks still due after the drain")

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
        executor contract), and the late success must flag a "no effect" attempt; half
        of those are never heard of (only the watch's lookups can find them)."""
        self.main_action = "land"
        self.landings.extend(self.overdue)
        self.overdue.clear()
        while self.landings:
            landing = self.landings.pop(self.rng.randrange(len(self.landings)))
            late = self.clock.now() >= landing.before
            breach = late and self.rng.random() < 0.5
            self.note(self.land(landing, breach=breach, lost=breach and self.rng.random() < 0.5))
            self.check()

    def check_no_late_effect_lost(self, *, final: bool = False) -> None:
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
            if self.effects.effect_count(key) == 0 or key in self.beyond_watch:
                continue
            if key in self.watched:
                if summary.flagged:
                    continue  # flagged; an admin then resolved it with the effect in view
                if summary.watch_due_at() is not None and not final:
                    continue  # a look of the watch is still to come
                raise Violation(
                    f"{attempt_id}: {summary.status} while the provider holds an effect that "
                    f"landed after the client gave up, its answer lost, and no later lookup "
                    f"flagged it (I12)"
                )
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
