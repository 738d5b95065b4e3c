"""Propose and present (design.md 5.1).

A proposal version stores the normalized spec with its payload and view hashes.
A presentation is single-use: its 256-bit token is shown
once and only its SHA-256 is stored, with a token-hash lookup item written in
the same commit (read back strongly consistent, never via an index).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain.directory import (
    DirectoryRecord,
    executor_build_record_id,
    is_directory_record_id,
)
from domain.errors import (
    ConcurrencyConflict,
    ExecutorBuildDraining,
    ExecutorBuildUnavailable,
    IllegalTransition,
    InvalidInput,
    InvalidSpec,
    LookupConflict,
    NondeterministicRenderer,
    NotFound,
    StaleVersion,
    TooManyPresentations,
    UnknownPermission,
)
from domain.ports import Commit, Lookup
from domain.problems import FieldProblem
from domain.proposal import Proposal, ProposalStatus
from domain.services.automatic import screen
from domain.services.context import ServiceContext
from domain.services.idempotency import IdempotencyKey
from domain.services.presentation_bindings import check_presentation_bindings
from domain.services.proposal_commit import Stored, screened, store_version
from domain.services.propose_checks import SPEC_POINTER, check_actor_may_propose, content_problems
from domain.services.quorum import check_member_presentation
from domain.services.read_cache import commit, read_proposal
from domain.services.retry import retry_on_conflict
from domain.spec import ProposalSpec, parse_spec, validated_payload_hash, view_hash
from domain.timeutil import format_utc

MIN_PRESENTATION_TTL = 60
MAX_PRESENTATION_TTL = 86400


def token_hash(token: str) -> str:
    """SHA-256 of an opaque token: the only form in which a token is stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_lookup_key(hashed: str) -> str:
    return f"token#{hashed}"


@dataclass(frozen=True)
class ProposalResult:
    """What ``POST /proposals`` returns."""

    proposal_id: str
    version: int
    payload_hash: str
    view_hash: str
    preview: str
    status: str
    attempt_id: str | None = None
    approval: dict[str, Any] | None = None


@dataclass(frozen=True)
class PresentationResult:
    """What ``POST /proposals/{id}/presentations`` returns; the token only here."""

    presentation_id: str
    token: str
    expires_at: str


def _render(ctx: ServiceContext, spec: ProposalSpec) -> tuple[str, str, str]:
    """Payload hash, preview text and view hash; the renderer must agree with itself."""
    first = ctx.renderer.render(spec)
    second = ctx.renderer.render(spec)
    if first != second:
        raise NondeterministicRenderer()
    ph = validated_payload_hash(spec)
    return ph, first, view_hash(ph, ctx.renderer.build, first)


def check_spec_acceptable(ctx: ServiceContext, spec: ProposalSpec, now: datetime) -> None:
    """Catalogue permission, an executor build available in the directory and
    hosted here as current (not draining), the build's content schema (its
    digest and the content), an unexpired spec."""
    if spec.permission not in ctx.permissions:
        raise UnknownPermission(
            problems=[FieldProblem(f"{SPEC_POINTER}/permission", "is not in the catalogue")]
        )
    build = ctx.store.get(
        DirectoryRecord, executor_build_record_id(spec.capability, spec.executor_build)
    )
    unavailable = [
        FieldProblem(
            f"{SPEC_POINTER}/executor_build",
            "is not a build of this capability that the directory allows and this server hosts",
        )
    ]
    if build is None or not build.flag("available"):
        raise ExecutorBuildUnavailable(problems=unavailable)
    problems: list[FieldProblem] = []
    if ctx.registry is not None:
        if ctx.registry.get(spec.capability, spec.executor_build) is None:
            raise ExecutorBuildUnavailable(problems=unavailable)
        if ctx.registry.is_draining(spec.capability, spec.executor_build):
            # Kept for the attempts and open presentations bound to it; new work uses
            # the capability's current build.
            raise ExecutorBuildDraining()
        problems = content_problems(ctx.registry, spec)
    if spec.expires_at <= now:
        problems.append(FieldProblem(f"{SPEC_POINTER}/expires_at", "must be in the future"))
    if problems:
        raise InvalidSpec(problems=problems)


def propose(
    ctx: ServiceContext,
    *,
    actor_id: str,
    spec_data: Any,
    lineage_id: str | None = None,
    expected_version: int | None = None,
    idempotency: IdempotencyKey | None = None,
    proposer: str | None = None,
) -> ProposalResult:
    """Create a new lineage, or version n+1 of an existing one (superseding n).

    ``proposer``: who creates a new lineage (recorded on it: its owner).
    With an idempotency key, a retry gets the first answer and the key is
    committed with the new version (one commit)."""
    if idempotency is not None:
        replay = _replayed_proposal(ctx, idempotency)
        if replay is not None:
            return replay
    try:
        return _propose(
            ctx, actor_id, spec_data, lineage_id, expected_version, idempotency, proposer
        )
    except LookupConflict:
        # a concurrent duplicate committed the key first: answer as its retry
        assert idempotency is not None
        replay = _replayed_proposal(ctx, idempotency)
        if replay is None:
            raise
        return replay


def _replayed_proposal(ctx: ServiceContext, idem: IdempotencyKey) -> ProposalResult | None:
    stored = idem.stored_answer(ctx.store, ctx.clock.now())
    if stored is None:
        return None
    proposal = ctx.store.get(Proposal, stored["proposal_id"])
    version = int(stored["version"])
    if proposal is None or version not in proposal.versions:
        raise NotFound()
    record = proposal.versions[version]
    preview = ctx.renderer.render(parse_spec(record["spec"]))
    claimed = stored["status"] == ProposalStatus.CLAIMED.value
    return ProposalResult(
        proposal.id,
        version,
        record["payload_hash"],
        record["view_hash"],
        preview,
        stored["status"],
        attempt_id=record["attempt_id"] if claimed else None,
        approval=record.get("approval") if claimed else None,
    )


def _propose(
    ctx: ServiceContext,
    actor_id: str,
    spec_data: Any,
    lineage_id: str | None,
    expected_version: int | None,
    idem: IdempotencyKey | None,
    proposer: str | None = None,
) -> ProposalResult:
    spec = parse_spec(spec_data, SPEC_POINTER)
    now = ctx.clock.now()
    check_spec_acceptable(ctx, spec, now)
    check_actor_may_propose(ctx, actor_id, spec.permission)
    ph, preview, vh = _render(ctx, spec)
    stored_spec = spec.canonical_dict()
    at = format_utc(now)

    if lineage_id is None:
        proposal_id = ctx.tokens.new_id("prop")

        def create_once(automatic: bool) -> ProposalResult:
            screening = screen(ctx, actor_id, spec, now, automatic=automatic, seed=proposal_id)
            proposal = Proposal(
                proposal_id=proposal_id,
                actor_id=actor_id,
                spec=stored_spec,
                payload_hash=ph,
                view_hash=vh,
                renderer_build=ctx.renderer.build,
                at=at,
                proposer=proposer,
            )
            stored = store_version(
                ctx, proposal, 1, screening, spec, now, _remember(idem, now, proposal_id, 1)
            )
            return _result(proposal, 1, preview, stored)

        return screened(create_once, proposal_id)

    def revise_once(automatic: bool) -> ProposalResult:
        screening = screen(ctx, actor_id, spec, now, automatic=automatic, seed=lineage_id)
        existing = ctx.store.get(Proposal, lineage_id)
        if existing is None:
            raise NotFound()
        if existing.actor_id != actor_id:
            raise InvalidInput.at("/actor_id", "is not the actor of this proposal lineage")
        version = existing.revise(
            spec=stored_spec,
            payload_hash=ph,
            view_hash=vh,
            renderer_build=ctx.renderer.build,
            expected_version=expected_version,
            at=at,
        )
        remembered = _remember(idem, now, existing.id, version)
        try:
            stored = store_version(ctx, existing, version, screening, spec, now, remembered)
        except ConcurrencyConflict as conflict:
            # A directory record the decision read moved (the policy set, a grant):
            # decide again. Anything else: the lineage moved past the expected version.
            if expected_version is not None and not is_directory_record_id(conflict.stream_id):
                raise StaleVersion() from None
            raise
        return _result(existing, version, preview, stored)

    return screened(revise_once, lineage_id)


def _result(proposal: Proposal, version: int, preview: str, stored: Stored) -> ProposalResult:
    record = proposal.versions[version]
    return ProposalResult(
        proposal.id,
        version,
        record["payload_hash"],
        record["view_hash"],
        preview,
        stored.status,
        attempt_id=stored.attempt_id,
        approval=stored.approval,
    )


def _remember(
    idem: IdempotencyKey | None, now: datetime, proposal_id: str, version: int
) -> Callable[[str], list[Lookup]]:
    """The idempotency key's record, once the answer's status is known."""

    def record(status: str) -> list[Lookup]:
        if idem is None:
            return []
        return [idem.record(now, proposal_id=proposal_id, version=str(version), status=status)]

    return record


def present(
    ctx: ServiceContext,
    *,
    proposal_id: str,
    version: int,
    identity_binding_id: str,
    channel_binding_id: str,
    conversation_key: str,
    ttl_seconds: int | None = None,
    idempotency: IdempotencyKey | None = None,
    actor_id: str | None = None,
) -> PresentationResult:
    """Create a single-use presentation bound to one actor, binding and view.

    ``actor_id``: a quorum member's own presentation (``quorum.py``); by default
    the proposal's actor's. The bindings must be that actor's, on one channel
    and for the conversation named (``check_presentation_bindings``), else
    InvalidInput.

    With an idempotency key the token is derived from it (``derive_token``), so
    a retry after a lost answer gets the same presentation and the same token."""
    ttl = ctx.presentation_ttl_seconds if ttl_seconds is None else ttl_seconds
    if not MIN_PRESENTATION_TTL <= ttl <= MAX_PRESENTATION_TTL:
        raise InvalidInput.at(
            "/ttl_seconds", f"must be between {MIN_PRESENTATION_TTL} and {MAX_PRESENTATION_TTL}"
        )
    if idempotency is not None:
        replay = _replayed_presentation(ctx, idempotency)
        if replay is not None:
            return replay
    presentation_id = ctx.tokens.new_id("pres")
    salt = ""
    if idempotency is None:
        token = ctx.tokens.new_token()
    else:
        salt = ctx.tokens.new_token()
        token = idempotency.derive_token(salt, presentation_id)
    hashed = token_hash(token)

    def present_once() -> PresentationResult:
        # From the read cache: the append below checks the proposal's version, so
        # a stale entry conflicts and the retry reads fresh. A refusal reached on
        # a cached read is judged again on a fresh one.
        try:
            return presented(read_proposal(ctx.store, ctx.cache, proposal_id))
        except (NotFound, IllegalTransition, StaleVersion, TooManyPresentations):
            if not ctx.cache.enabled:
                raise
        ctx.cache.forget([proposal_id])
        return presented(ctx.store.get(Proposal, proposal_id))

    def presented(proposal: Proposal | None) -> PresentationResult:
        now = ctx.clock.now()
        expires = now + timedelta(seconds=ttl)
        if proposal is None:
            raise NotFound()
        check_member_presentation(ctx, proposal, version, actor_id or proposal.actor_id, now)
        # before anything is counted: a control no one can approve takes no slot
        check_presentation_bindings(
            ctx,
            actor_id=actor_id or proposal.actor_id,
            identity_binding_id=identity_binding_id,
            channel_binding_id=channel_binding_id,
            conversation_key=conversation_key,
        )
        proposal.present(
            presentation_id=presentation_id,
            version=version,
            token_hash=hashed,
            identity_binding_id=identity_binding_id,
            channel_binding_id=channel_binding_id,
            conversation_key=conversation_key,
            expires_at=format_utc(expires),
            at=format_utc(now),
            now=now,
            max_active=ctx.max_active_presentations,
            actor_id=actor_id,
        )
        lookup = Lookup(
            key=token_lookup_key(hashed),
            value={"proposal_id": proposal_id, "presentation_id": presentation_id},
            expires_at=expires,
        )
        lookups = [lookup]
        if idempotency is not None:
            lookups.append(
                idempotency.record(
                    now, presentation_id=presentation_id, salt=salt, expires_at=format_utc(expires)
                )
            )
        try:
            commit(ctx.store, ctx.cache, Commit(aggregates=[proposal], lookups=lookups))
        except LookupConflict:
            replay = _replayed_presentation(ctx, idempotency) if idempotency else None
            if replay is None:
                raise
            return replay
        return PresentationResult(presentation_id, token, format_utc(expires))

    def contended() -> PresentationResult:
        raise ConcurrencyConflict(proposal_id)

    return retry_on_conflict(present_once, exhausted=contended)


def _replayed_presentation(ctx: ServiceContext, idem: IdempotencyKey) -> PresentationResult | None:
    stored = idem.stored_answer(ctx.store, ctx.clock.now())
    if stored is None:
        return None
    token = idem.derive_token(stored["salt"], stored["presentation_id"])
    return PresentationResult(stored["presentation_id"], token, stored["expires_at"])
