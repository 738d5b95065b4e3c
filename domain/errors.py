"""Domain errors: one base class, flat specific subclasses.

Every error carries a stable machine ``code`` and a ``detail`` that is safe to
show to a caller: it never contains a token, spec content or provider data.
The HTTP layer maps codes to status codes in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from domain.problems import BODY, FieldProblem, summary


class LedgerError(Exception):
    """Base class of every error the ledger raises on purpose."""

    code: str = "ledger_error"
    default_detail: str = "The request could not be completed."

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or self.default_detail
        super().__init__(self.detail)


class InvalidInput(LedgerError):
    """Input failed validation (unknown field, wrong type, out of bounds).

    ``problems`` names each failing field (a JSON pointer into the request and
    what it needs); without a ``detail`` of its own the detail lists them."""

    code = "invalid_input"
    default_detail = "The request body is not valid."

    def __init__(self, detail: str | None = None, *, problems: Sequence[FieldProblem] = ()) -> None:
        self.problems: tuple[FieldProblem, ...] = tuple(problems)
        if detail is None and self.problems:
            detail = summary(self.problems, self.default_detail)
        super().__init__(detail)

    @classmethod
    def at(cls, pointer: str, message: str, location: str = BODY) -> Self:
        """The error of one failing field: ``cls.at("/reason", "must be ...")``."""
        return cls(problems=[FieldProblem(pointer, message, location)])


class InvalidSpec(InvalidInput):
    """A proposal spec failed validation or canonicalization."""

    code = "invalid_spec"
    default_detail = "The proposal spec is not valid."


class UnknownPermission(InvalidInput):
    """A permission name is not in the configured catalogue."""

    code = "unknown_permission"
    default_detail = "The permission is not in the catalogue."


class UnknownActor(InvalidInput):
    """A proposal names an actor the directory does not hold (refused at propose,
    so the proposer learns it at once instead of from a failed approval)."""

    code = "unknown_actor"
    default_detail = "/actor_id: no actor of that id is in the directory"


class ActorDisabled(InvalidInput):
    """A proposal names an actor the directory holds disabled."""

    code = "actor_disabled"
    default_detail = "/actor_id: the actor is disabled in the directory"


class PermissionNotGranted(InvalidInput):
    """The proposal's actor does not hold the spec's permission in the directory."""

    code = "permission_not_granted"
    default_detail = "/spec/permission: the actor does not hold this permission"


class ExecutorBuildUnavailable(InvalidInput):
    """The spec names an executor build that is not registered and available."""

    code = "executor_build_unavailable"
    default_detail = "The executor build is not available."


class ExecutorBuildDraining(InvalidInput):
    """The spec names a build kept only for what is already bound to it (a rollover)."""

    code = "executor_build_draining"
    default_detail = (
        "The executor build is draining: new proposals name the capability's current "
        "build (see `ledger executors`)."
    )


class NondeterministicRenderer(InvalidInput):
    """The renderer produced different text for the same spec."""

    code = "nondeterministic_renderer"
    default_detail = "The preview renderer is not deterministic."


class NotFound(LedgerError):
    """The record does not exist or is not visible to the caller."""

    code = "not_found"
    default_detail = "Not found."


class ConcurrencyConflict(LedgerError):
    """Another writer appended to a stream first (or a read-set record changed)."""

    code = "concurrency_conflict"
    default_detail = "The record was changed concurrently; retry."

    def __init__(self, stream_id: str, detail: str | None = None) -> None:
        self.stream_id = stream_id
        super().__init__(detail)


class LookupConflict(LedgerError):
    """A create-only lookup item (token hash, etc.) already exists."""

    code = "lookup_conflict"
    default_detail = "A unique lookup item already exists."

    def __init__(self, key: str, detail: str | None = None) -> None:
        self.key = key
        super().__init__(detail)


class CommitTooLarge(LedgerError):
    """A commit has more items than one atomic write can hold."""

    code = "commit_too_large"
    default_detail = "The commit is larger than one atomic write allows."


class EventTooLarge(CommitTooLarge):
    """One event would be larger than the store's stated per-event limit."""

    code = "event_too_large"
    default_detail = "An event would be larger than the store allows; nothing was written."


class TooManyPresentations(LedgerError):
    """The proposal version already has the most active presentations allowed."""

    code = "too_many_presentations"
    default_detail = (
        "This proposal version has too many active presentations; "
        "wait for one to expire or revise the proposal."
    )


class StoreUnavailable(LedgerError):
    """The event store could not be reached or failed; nothing was written."""

    code = "store_unavailable"
    default_detail = "The store is unavailable; nothing was written."


class IllegalTransition(LedgerError):
    """A command is not allowed in the aggregate's current state."""

    code = "illegal_transition"
    default_detail = "That change is not allowed in the current state."


class ProposalClaimed(LedgerError):
    """The proposal version is already claimed and cannot be revised."""

    code = "proposal_claimed"
    default_detail = "The proposal is already claimed."


class StaleVersion(LedgerError):
    """The caller's expected proposal version is not the current one."""

    code = "stale_version"
    default_detail = "The proposal version is not current."


class ApprovalUnavailable(LedgerError):
    """Uniform approval failure: reveals nothing about why or what exists."""

    code = "approval_unavailable"
    default_detail = "This approval is not available."
    #: why it failed closed: for logs and metrics, never for the response body
    reason: str = "unspecified"


class ProposalConflicted(LedgerError):
    """The target drifted since the proposal was made; it was marked conflicted."""

    code = "proposal_conflicted"
    default_detail = "The target changed since the proposal was made."


class StaleRevision(LedgerError):
    """The caller's expected attempt revision is not the current one."""

    code = "stale_revision"
    default_detail = "The attempt revision is not current."


class NotOutcomeUnknown(LedgerError):
    """Resolution is only allowed from outcome_unknown."""

    code = "not_outcome_unknown"
    default_detail = "The attempt is not in outcome_unknown."


class Unauthenticated(LedgerError):
    """Missing, malformed, expired or wrongly signed credentials."""

    code = "unauthenticated"
    default_detail = "Authentication required."


class Forbidden(LedgerError):
    """The caller's role may not use this operation."""

    code = "forbidden"
    default_detail = "This role may not perform this operation."


class ExecutorNoEffect(LedgerError):
    """The provider proved that this request wrote nothing (failed_safe on an attempt's
    first dispatch; on a re-send it proves nothing of the earlier dispatches).

    ``reason_code`` is a bounded, content-free code kept on the attempt
    (``provider_no_write`` when the executor names none).
    """

    code = "executor_no_effect"
    default_detail = "The provider reported that nothing was written."

    def __init__(self, detail: str | None = None, *, reason_code: str = "provider_no_write"):
        super().__init__(detail)
        self.reason_code = reason_code


class ExecutorKeyReused(ExecutorNoEffect):
    """The provider refused the request because its idempotency key was used before
    (the http executor: a 422). That request wrote nothing; on a re-send it is
    evidence that an earlier dispatch landed, never a proof of no effect. Its code
    is its parent's: it never reaches a caller, and maps the same way if it did.
    """

    default_detail = "The provider reported that the idempotency key was already used."


class ExecutorOutcomeUncertain(LedgerError):
    """The call may or may not have applied (timeout, lost response, deadline)."""

    code = "executor_outcome_uncertain"
    default_detail = "The outcome of the call is not known."


class ExecutorReceiptUnusable(LedgerError):
    """The provider said the effect applied, but its answer cannot be kept as a receipt
    (not JSON, too large, a receipt field missing); the attempt becomes outcome_unknown.
    """

    code = "executor_receipt_unusable"
    default_detail = "The provider's answer could not be kept as a receipt."

    def __init__(self, reason_code: str) -> None:
        super().__init__()
        self.reason_code = reason_code


class ReconcilerUnavailable(LedgerError):
    """The attempt's executor build has no registered read-only reconciler."""

    code = "reconciler_unavailable"
    default_detail = "No read-only reconciler is registered for this executor build."


class DigestInvalid(LedgerError):
    """A digest or proof file is not one this ledger can check (format, key, ledger)."""

    code = "digest_invalid"
    default_detail = "The digest is not valid."


class IdempotencyKeyRefused(InvalidInput):
    """An Idempotency-Key that is too long, malformed, used by another caller or
    with another request: one uniform answer whatever the reason."""

    code = "idempotency_key_refused"
    default_detail = "The Idempotency-Key cannot be used for this request."


class IdempotencyKeyInUse(LedgerError):
    """A request with the same Idempotency-Key is still being processed."""

    code = "idempotency_key_in_use"
    default_detail = "A request with this Idempotency-Key is in progress; retry later."


class InvalidPolicySet(InvalidInput):
    """A policy set is not valid Cedar or breaks the ledger's rules for one
    (every policy needs a unique ``@id``; no templates; ``@auto_approve`` on permits)."""

    code = "invalid_policy_set"
    default_detail = "The policy set is not valid."


class PolicyDenied(LedgerError):
    """A ``forbid`` policy holds for this proposal; the detail names the policy ids."""

    code = "policy_denied"
    default_detail = "A policy forbids this proposal."

    def __init__(self, policy_ids: Sequence[str] = (), detail: str | None = None) -> None:
        self.policy_ids = tuple(policy_ids)
        if self.policy_ids and detail is None:
            shown = ", ".join(self.policy_ids[:5]) + (" ..." if len(self.policy_ids) > 5 else "")
            detail = f"Forbidden by policy {shown}."
        super().__init__(detail)


class PolicyDigestMismatch(LedgerError):
    """The spec's ``policy_digest`` is not the configured policy set's digest."""

    code = "policy_digest_mismatch"
    default_detail = (
        "The spec's policy_digest is not the current policy set's digest (GET /policies gives it)."
    )


class StalePolicySet(LedgerError):
    """The caller's expected policy set version is not the current one."""

    code = "stale_policy_set"
    default_detail = "The policy set changed since the expected version."


class StandingGrantRefused(LedgerError):
    """A standing grant cannot be made or revoked for this caller (its provenance
    does not hold, or the grant is not one of its actor's)."""

    code = "standing_grant_refused"
    default_detail = "This standing grant cannot be made or changed by this caller."


class TooManyStandingGrants(LedgerError):
    """An actor holds the most live standing grants allowed."""

    code = "too_many_standing_grants"
    default_detail = "The actor holds the most live standing grants allowed; revoke one first."
