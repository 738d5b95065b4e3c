"""Reveal an attempt's approved preview to an admin, recording the reveal first."""

from __future__ import annotations

from domain.attempt import ExecutionAttempt
from domain.errors import NotFound
from domain.oversight import PreviewReveals, reveals_id
from domain.ports import Commit
from domain.proposal import Proposal
from domain.services.context import ServiceContext
from domain.services.retry import retry_on_conflict
from domain.spec import parse_spec
from domain.timeutil import format_utc


def reveal_preview(ctx: ServiceContext, *, attempt_id: str, by: str) -> tuple[str, bool]:
    """The rendered preview of the version the attempt executes, after the reveal
    (who, when, which attempt) is committed to the log: no reveal goes unrecorded.

    The second value says whether this process's renderer is the build that
    rendered it for the approval (the preview is deterministic, so then it is
    exactly what the person saw)."""
    attempt = ctx.store.get(ExecutionAttempt, attempt_id)
    if attempt is None:
        raise NotFound()
    proposal = ctx.store.get(Proposal, attempt.proposal_id)
    record = proposal.version_record(attempt.proposal_version) if proposal else None
    if record is None:
        raise NotFound("The approved version is not in the log.")

    def record_once() -> None:
        at = format_utc(ctx.clock.now())
        reveals = ctx.store.get(PreviewReveals, reveals_id(attempt_id))
        if reveals is None:
            reveals = PreviewReveals(attempt_id=attempt_id, at=at)
        reveals.reveal(by=by, at=at)
        ctx.store.commit(Commit(aggregates=[reveals]))

    retry_on_conflict(record_once, exhausted=lambda: record_once())
    preview = ctx.renderer.render(parse_spec(record["spec"]))
    return preview, record.get("renderer_build") == ctx.renderer.build
