"""The watch of a "no effect" settlement (I12): look again, read-only, on a schedule.

A ``correlation_lookup`` attempt settled ``failed_safe`` by a lookup's "not
applied", or resolved ``no_effect`` by an admin, carries a bounded plan of
looks (``ServiceContext.no_effect_watch``, ``LEDGER_NO_EFFECT_WATCH_SECONDS``)
on that settling event, and its due-work entry names the next look, written in
the same commit as the transition (so recovery finds it by a query, like every
other next action). Recovery runs the look: the attempt's registered read-only
reconciler, never the executor (I6). ``applied`` appends ``EffectAfterNoEffect``
(the attempt goes to the attention list and its webhook is sent); anything else
appends ``LookedAgain`` and the entry moves to the next look, or goes once the
plan is done.

The attempt is terminal, so no lease can race a look (I5). A look that loses a
commit race (a late worker observation, another recovery tick, an admin)
re-reads and decides again: at most one look per step is recorded, and none
after the settlement was contradicted (I8).

Other delivery modes have no lookup: nothing can look again, and nothing is
watched (an ``operator_reconciliation_only`` or ``provider_idempotency``
attempt resolved ``no_effect`` rests on the admin's word).
"""

from __future__ import annotations

import contextlib

from domain.attempt import ExecutionAttempt
from domain.errors import ConcurrencyConflict, IllegalTransition, InvalidSpec, ReconcilerUnavailable
from domain.ports import Commit, DueWork, ReadCheck
from domain.services.context import ServiceContext
from domain.services.resolution import ask_reconciler
from domain.services.retry import retry_on_conflict
from domain.services.worker_policy import Outcome

APPLIED = "applied"
VERDICTS = frozenset(
    {
        APPLIED,
        "not_applied",
        "unknown",
        "lookup_failed",
        "proposal_missing",
        "reconciler_unavailable",
        "stored_spec_invalid",
    }
)
"""What a look can record: bounded codes only, never a provider's words (I10)."""


def verdict_of(ctx: ServiceContext, attempt: ExecutionAttempt) -> str:
    """The look's verdict. ``applied`` whatever the receipt: the watch stores none,
    and an unsafe receipt still says that the effect exists."""
    try:
        answer = ask_reconciler(ctx, attempt)
    except ReconcilerUnavailable:
        return "reconciler_unavailable"
    except InvalidSpec:
        return "stored_spec_invalid"
    if isinstance(answer, str):
        return answer
    if answer.verdict in (APPLIED, "not_applied"):
        return answer.verdict
    return "unknown"


def look_again(ctx: ServiceContext, attempt: ExecutionAttempt) -> Outcome:
    """Take the watch's due look at a settled attempt (recovery's due entry said so)."""
    current = attempt

    def look_once() -> Outcome:
        nonlocal current
        now = ctx.clock.now()
        due = current.watch_due_at()
        if due is None:
            return Outcome.SKIPPED
        if now < due:
            # An entry earlier than the look (a hint): move it, unless a writer raced.
            with contextlib.suppress(ConcurrencyConflict):
                ctx.store.commit(
                    Commit(
                        read_set=[ReadCheck(current.id, current.version)],
                        due=[DueWork(current.id, due)],
                        durable=False,
                    )
                )
            return Outcome.SKIPPED
        verdict = verdict_of(ctx, current)
        try:
            current.look_again(verdict=verdict, now=now)
        except IllegalTransition:
            return Outcome.SKIPPED
        try:
            ctx.store.commit(
                Commit(aggregates=[current], due=[DueWork(current.id, current.next_action_at())])
            )
        except ConcurrencyConflict:
            fresh = ctx.store.get(ExecutionAttempt, current.id)
            if fresh is None:
                return Outcome.MISSING
            current = fresh
            raise
        if verdict == APPLIED:
            return Outcome.EFFECT_AFTER_NO_EFFECT
        return Outcome.LOOKED_AGAIN

    return retry_on_conflict(look_once, exhausted=lambda: Outcome.SKIPPED)
