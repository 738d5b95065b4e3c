"""One exception class per error code of the ledger's uniform error body.

Every refusal of the server is ``{"error": <code>, "detail": <safe text>}``;
the client raises the class of that code, a subclass of
:class:`LedgerClientError` carrying ``code``, ``status`` and ``detail``. The
input refusals (422) derive from :class:`InvalidInput`, as on the server; one
about the request's fields also carries ``errors``, every failing field by its
JSON pointer, and ``error_count``. A code this client does not know yet raises
the base class with that code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldError:
    """One failing field of a refused request (the server's ``FieldErrorOut``)."""

    pointer: str
    """A JSON pointer into the request body (``/spec/content/title``), or ``/`` and a
    parameter's name."""
    message: str
    """What the field needs, never what was sent."""
    location: str = "body"
    """``body``, or ``query``, ``path`` or ``header`` for a parameter."""


class LedgerClientError(Exception):
    """Base class of everything the client raises on purpose."""

    code: str = "ledger_error"

    def __init__(
        self,
        detail: str,
        *,
        status: int = 0,
        code: str | None = None,
        errors: tuple[FieldError, ...] = (),
        error_count: int | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status  # 0: the server gave no answer (or none that was an HTTP one)
        if code is not None:
            self.code = code
        self.errors = errors
        """Every failing field the server listed (empty unless it is a field error)."""
        self.error_count = len(errors) if error_count is None else error_count
        """How many failing fields the server found (more than listed past its bound)."""

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(code={self.code!r}, status={self.status}, detail={self.detail!r})"


# -- refusals of the server, by code ---------------------------------------------------


class InvalidInput(LedgerClientError):
    """The request failed validation (unknown field, wrong type, out of bounds)."""

    code = "invalid_input"


class InvalidSpec(InvalidInput):
    """The proposal spec failed validation or canonicalization."""

    code = "invalid_spec"


class UnknownPermission(InvalidInput):
    """The permission is not in the server's catalogue."""

    code = "unknown_permission"


class UnknownActor(InvalidInput):
    """Propose: the directory has no such actor."""

    code = "unknown_actor"


class ActorDisabled(InvalidInput):
    """Propose: the actor is disabled in the directory."""

    code = "actor_disabled"


class PermissionNotGranted(InvalidInput):
    """Propose: the actor does not hold the spec's permission."""

    code = "permission_not_granted"


class ExecutorBuildUnavailable(InvalidInput):
    """The spec names an executor build that is not registered and available."""

    code = "executor_build_unavailable"


class ExecutorBuildDraining(InvalidInput):
    """The spec names a build that is draining: kept only for the work already
    bound to it; a new proposal names the capability's current build."""

    code = "executor_build_draining"


class NondeterministicRenderer(InvalidInput):
    """The server's preview renderer gave different text for the same spec."""

    code = "nondeterministic_renderer"


class IdempotencyKeyRefused(InvalidInput):
    """The Idempotency-Key was used with another request or by another caller, or is malformed."""

    code = "idempotency_key_refused"


class InvalidPolicySet(InvalidInput):
    """The Cedar policy set does not parse or breaks a rule of the ledger's."""

    code = "invalid_policy_set"


class PolicyDenied(LedgerClientError):
    """A ``forbid`` policy holds for this proposal; the detail names the policy ids."""

    code = "policy_denied"


class PolicyDigestMismatch(LedgerClientError):
    """The spec's ``policy_digest`` is not the current set's: read ``policies()`` again."""

    code = "policy_digest_mismatch"


class StalePolicySet(LedgerClientError):
    """The policy set changed since the expected version."""

    code = "stale_policy_set"


class StandingGrantRefused(LedgerClientError):
    """This standing grant cannot be made or changed by this caller."""

    code = "standing_grant_refused"


class TooManyStandingGrants(LedgerClientError):
    """The actor holds the most live standing grants allowed; revoke one first."""

    code = "too_many_standing_grants"


class CommitTooLarge(LedgerClientError):
    """The change is larger than one atomic write allows."""

    code = "commit_too_large"


class EventTooLarge(CommitTooLarge):
    """One event would be larger than the store allows."""

    code = "event_too_large"


class NotFound(LedgerClientError):
    """The record does not exist or the caller may not see it (the same answer)."""

    code = "not_found"


class ApprovalUnavailable(LedgerClientError):
    """The uniform refusal of an approval or decline: it says nothing of why."""

    code = "approval_unavailable"


class ConcurrencyConflict(LedgerClientError):
    """Another writer changed the record first."""

    code = "concurrency_conflict"


class LookupConflict(LedgerClientError):
    """A unique lookup item already exists."""

    code = "lookup_conflict"


class IdempotencyKeyInUse(LedgerClientError):
    """A request with this Idempotency-Key is still in progress (retried by the client)."""

    code = "idempotency_key_in_use"


class ProposalClaimed(LedgerClientError):
    """The proposal version is already claimed and cannot be revised."""

    code = "proposal_claimed"


class StaleVersion(LedgerClientError):
    """The expected proposal version is not the current one."""

    code = "stale_version"


class ProposalConflicted(LedgerClientError):
    """The target changed since the proposal was made; it was marked conflicted."""

    code = "proposal_conflicted"


class StaleRevision(LedgerClientError):
    """The expected attempt revision is not the current one."""

    code = "stale_revision"


class NotOutcomeUnknown(LedgerClientError):
    """Resolution needs an attempt in ``outcome_unknown``."""

    code = "not_outcome_unknown"


class IllegalTransition(LedgerClientError):
    """The change is not allowed in the record's current state."""

    code = "illegal_transition"


class ReconcilerUnavailable(LedgerClientError):
    """The attempt's build has no registered read-only reconciler."""

    code = "reconciler_unavailable"


class TooManyPresentations(LedgerClientError):
    """The proposal version has the most active presentations allowed."""

    code = "too_many_presentations"


class ExecutorNoEffect(LedgerClientError):
    """The provider proved that nothing was written."""

    code = "executor_no_effect"


class ExecutorOutcomeUncertain(LedgerClientError):
    """The outcome of a provider call is not known."""

    code = "executor_outcome_uncertain"


class ExecutorReceiptUnusable(LedgerClientError):
    """The provider's answer could not be kept as a receipt."""

    code = "executor_receipt_unusable"


class StoreUnavailable(LedgerClientError):
    """The server's store is unavailable; nothing was written (retried by the client)."""

    code = "store_unavailable"


class DigestInvalid(LedgerClientError):
    """The server cannot make or check a digest."""

    code = "digest_invalid"


class Unauthenticated(LedgerClientError):
    """Missing, malformed, expired or wrongly signed bearer token."""

    code = "unauthenticated"


class Forbidden(LedgerClientError):
    """The token's role may not use this operation."""

    code = "forbidden"


class MethodNotAllowed(LedgerClientError):
    """The route does not take this method."""

    code = "method_not_allowed"


class PayloadTooLarge(LedgerClientError):
    """The request body is larger than the server takes."""

    code = "payload_too_large"


class UnsupportedMediaType(LedgerClientError):
    """The body was not sent as JSON."""

    code = "unsupported_media_type"


class HttpError(LedgerClientError):
    """Another refusal of the HTTP layer."""

    code = "http_error"


class InternalError(LedgerClientError):
    """The server failed unexpectedly."""

    code = "internal_error"


class TooManyRequests(LedgerClientError):
    """429 from the server or a gateway in front of it (retried by the client)."""

    code = "too_many_requests"


# -- raised by the client itself -------------------------------------------------------


class LedgerConnectionError(LedgerClientError):
    """No answer: the connection failed or timed out, on every try the policy allowed."""

    code = "connection_failed"


class UnexpectedResponse(LedgerClientError):
    """The answer was not what the API documents (not JSON, wrong shape)."""

    code = "unexpected_response"


class NoAvailableBuild(ExecutorBuildUnavailable):
    """The server hosts no available build of the capability (found before proposing)."""

    code = "no_available_build"


class WebhookVerificationError(LedgerClientError):
    """A webhook delivery's signature or timestamp does not verify: drop it (answer 4xx)."""

    code = "webhook_invalid"


ERRORS_BY_CODE: dict[str, type[LedgerClientError]] = {
    cls.code: cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, LedgerClientError) and cls is not LedgerClientError
}
"""Every error class by its code (the server's codes and the client's own)."""

_BY_STATUS = {429: TooManyRequests, 500: InternalError}


def error_from_answer(status: int, body: Any) -> LedgerClientError:
    """The exception for a non-2xx answer: the uniform body's code, else the status."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code = body["error"]
        detail = body.get("detail")
        text = detail if isinstance(detail, str) else code
        cls = ERRORS_BY_CODE.get(code, LedgerClientError)
        problems = _field_errors(body.get("errors"))
        count = body.get("error_count")
        counted = count if isinstance(count, int) and count >= len(problems) else None
        return cls(text, status=status, code=code, errors=problems, error_count=counted)
    cls = _BY_STATUS.get(status, HttpError if status < 500 else InternalError)
    return cls(f"HTTP {status} without the ledger's error body", status=status)


def _field_errors(listed: Any) -> tuple[FieldError, ...]:
    """The body's ``errors``, each kept only when it has the documented shape."""
    if not isinstance(listed, list):
        return ()
    return tuple(
        FieldError(item["pointer"], item["message"], str(item.get("location", "body")))
        for item in listed
        if isinstance(item, dict)
        and isinstance(item.get("pointer"), str)
        and isinstance(item.get("message"), str)
    )
