"""Which worker may take an attempt: only one that hosts its exact build (I11).

An attempt is bound to one (capability, executor build) when it is approved.
A worker leases it only when its registry has that exact build; any other
worker leaves it as it is (no lease, no event, its due-work entry untouched),
so it stays visible to every worker that does host the build, and nothing is
counted against its pre-dispatch budget. During a rolling deploy, a canary or
in a pool where not every worker hosts every build, the attempt simply waits
for a worker with its build; past ``LEDGER_WAITING_FOR_BUILD_SECONDS`` it is
on the attention list as ``waiting_for_build`` (``projections.attention``).

The one exception is the directory's own word: when the executor-build record
says the build is withdrawn, no worker may run it, so any worker settles it
the way the hosting worker's recheck would (``executor_build_unavailable``):
``failed_safe`` before anything was dispatched (a proved no-write), and
``outcome_unknown`` after a dispatch (an earlier call may have landed; a
human decides). The commit condition-checks the record at the version read,
so a build made available again in between wins.
"""

from __future__ import annotations

from domain.attempt import ExecutionAttempt
from domain.directory import executor_build_record_id
from domain.errors import ConcurrencyConflict, IllegalTransition
from domain.ports import Commit, DueWork, ReadCheck
from domain.services.context import ServiceContext
from domain.services.read_cache import read_directory
from domain.services.worker_policy import Outcome

BUILD_WITHDRAWN = "executor_build_unavailable"
"""The reason code when the directory withdrew the build (the recheck's own code)."""


def hosts(ctx: ServiceContext, attempt: ExecutionAttempt) -> bool:
    """True when this worker's registry has the attempt's exact build."""
    registry = ctx.registry
    return registry is not None and (
        registry.get(attempt.capability, attempt.executor_build) is not None
    )


def not_hosted(ctx: ServiceContext, attempt: ExecutionAttempt) -> Outcome:
    """A due attempt whose build this worker lacks: leave it for a worker that
    has it, unless the directory says the build is withdrawn.

    ``attempt`` is queued (due), or executing with an expired lease after a
    dispatch. Reads the executor-build record fresh: a cached "available"
    could keep a withdrawn build's attempts waiting for ever.
    """
    record_id = executor_build_record_id(attempt.capability, attempt.executor_build)
    record, _ = read_directory(ctx.store, ctx.cache, record_id, fresh=True)
    if record is None or record.flag("available"):
        return Outcome.NOT_HOSTED
    now = ctx.clock.now()
    try:
        if attempt.dispatched:
            attempt.record_unknown(reason_code=BUILD_WITHDRAWN, now=now)
            outcome = Outcome.OUTCOME_UNKNOWN
        else:
            attempt.fail_safe(reason_code=BUILD_WITHDRAWN, now=now)
            outcome = Outcome.FAILED_SAFE
    except IllegalTransition:
        return Outcome.SKIPPED
    try:
        ctx.store.commit(
            Commit(
                aggregates=[attempt],
                read_set=[ReadCheck(record.id, record.version)],
                due=[DueWork(attempt.id, attempt.next_action_at())],
            )
        )
    except ConcurrencyConflict:
        return Outcome.SKIPPED  # the attempt moved on, or the build record changed
    return outcome
