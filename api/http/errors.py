"""Every error leaves the API as ``{"error": <code>, "detail": <safe text>}``;
an error about the request's fields adds ``errors`` (one entry per failing
field: its JSON pointer and what it needs) and ``error_count``.

This module is the ONE place where domain error codes become HTTP statuses.
Routes raise domain errors (``domain.errors``) and never build error responses
themselves. Details never echo request content: validation messages name field
locations and what was expected, not what was sent (I10).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.service.validation import request_problems
from domain.errors import InvalidInput, LedgerError
from domain.problems import MAX_PROBLEMS, FieldProblem, summary

logger = logging.getLogger("ledger.api")

STATUS_BY_CODE: dict[str, int] = {
    # input
    "invalid_input": 422,
    "invalid_spec": 422,
    "unknown_permission": 422,
    "unknown_actor": 422,
    "actor_disabled": 422,
    "permission_not_granted": 422,
    "executor_build_unavailable": 422,
    "executor_build_draining": 422,
    "nondeterministic_renderer": 422,
    "commit_too_large": 422,
    "event_too_large": 422,
    "idempotency_key_refused": 422,
    # existence
    "not_found": 404,
    "approval_unavailable": 404,
    # conflicts
    "concurrency_conflict": 409,
    "lookup_conflict": 409,
    "idempotency_key_in_use": 409,
    "proposal_claimed": 409,
    "stale_version": 409,
    "proposal_conflicted": 409,
    "stale_revision": 409,
    "not_outcome_unknown": 409,
    "illegal_transition": 409,
    "reconciler_unavailable": 409,
    "too_many_presentations": 409,
    # providers (worker-side; 502 should a route ever let one through)
    "executor_no_effect": 502,
    "executor_outcome_uncertain": 502,
    "executor_receipt_unusable": 502,
    # infrastructure
    "store_unavailable": 503,
    "digest_invalid": 500,  # the server's own signing key does not load
    # caller
    "unauthenticated": 401,
    "forbidden": 403,
    # policies and standing grants (docs/policies.md)
    "invalid_policy_set": 422,
    "policy_denied": 403,
    "policy_digest_mismatch": 409,
    "stale_policy_set": 409,
    "standing_grant_refused": 403,
    "too_many_standing_grants": 409,
}
"""Domain error code -> HTTP status. Add a line here for every new error code."""

# Errors raised by the HTTP layer itself (framework, middleware), by status.
HTTP_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_input", "The request could not be parsed."),
    401: ("unauthenticated", "Authentication required."),
    403: ("forbidden", "This role may not perform this operation."),
    404: ("not_found", "Not found."),
    405: ("method_not_allowed", "Method not allowed."),
    413: ("payload_too_large", "The request body is too large."),
    415: ("unsupported_media_type", "Send the body as application/json."),
}
INTERNAL_ERROR = ("internal_error", "Internal error.")


class FieldErrorOut(BaseModel):
    """One failing field of a request."""

    pointer: str = Field(
        description="Where: a JSON pointer (RFC 6901) into the request body, such as "
        "`/spec/content/title` (empty for the body as a whole); for a query, path or header "
        "parameter, `/` and its name. A key of the caller's that is not a plain name or "
        "looks like a secret is shown as `*`."
    )
    message: str = Field(
        description="What the field needs, never what was sent; an unknown field reads "
        "`unknown field /spec/foo is not permitted`."
    )
    location: str = Field(
        default="body",
        description="`body`, or `query`, `path` or `header` for a parameter.",
    )


class ErrorBody(BaseModel):
    """The uniform error body of every non-2xx response."""

    error: str = Field(description="The stable error code (`invalid_spec`, `not_found`...).")
    detail: str = Field(description="Safe text for people: never a token or request content.")
    errors: list[FieldErrorOut] | None = Field(
        default=None,
        max_length=MAX_PROBLEMS,
        description="Only on an error about the request's fields (a 422): every failing "
        f"field, at most {MAX_PROBLEMS} (then `error_count` says how many were found).",
    )
    error_count: int | None = Field(
        default=None,
        ge=1,
        description="With `errors`: how many failing fields were found (more than listed "
        f"when above {MAX_PROBLEMS}).",
    )


def error_response(
    status: int,
    code: str,
    detail: str,
    headers: dict[str, str] | None = None,
    problems: tuple[FieldProblem, ...] | list[FieldProblem] = (),
) -> JSONResponse:
    """Build the uniform error response; 401 always carries a Bearer challenge."""
    merged = dict(headers or {})
    if status == 401:
        merged["WWW-Authenticate"] = "Bearer"
    body: dict[str, Any] = {"error": code, "detail": detail}
    if problems:
        body["errors"] = [
            {"pointer": p.pointer, "message": p.message, "location": p.location}
            for p in problems[:MAX_PROBLEMS]
        ]
        body["error_count"] = len(problems)
    return JSONResponse(body, status_code=status, headers=merged)


def status_for(exc: LedgerError) -> int:
    """The status of a domain error: its own code, else the nearest mapped base class."""
    for cls in type(exc).__mro__:
        code = getattr(cls, "code", None)
        if code in STATUS_BY_CODE:
            return STATUS_BY_CODE[code]
    return 400


async def _ledger_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LedgerError)
    problems = exc.problems if isinstance(exc, InvalidInput) else ()
    return error_response(status_for(exc), exc.code, exc.detail, problems=problems)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = request_problems(exc.errors())
    detail = summary(problems, "The request is not valid.")
    return error_response(422, "invalid_input", detail, problems=problems)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code, detail = HTTP_ERRORS.get(exc.status_code, ("http_error", "The request failed."))
    if exc.status_code >= 500:
        code, detail = INTERNAL_ERROR
    return error_response(exc.status_code, code, detail, dict(exc.headers or {}))


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers; unexpected exceptions are handled by the error boundary."""
    app.add_exception_handler(LedgerError, _ledger_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries documenting the uniform error body."""
    return {status: {"model": ErrorBody} for status in statuses}
