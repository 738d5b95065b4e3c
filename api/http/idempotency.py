"""The ``Idempotency-Key`` header of the retry-safe POST routes.

Routers pass the header's value to the service (``api.service.idempotency``),
which scopes the key to the caller, fingerprints the request with its route
and holds it while the request is processed: a duplicate that arrives
meanwhile in this process gets 409 ``idempotency_key_in_use``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Request
from pydantic import BaseModel

from api.http.auth import Caller
from api.service.idempotency import request_key
from domain.services.idempotency import MAX_KEY_CHARS, IdempotencyKey

# No length limit here: a longer value gets the uniform refusal body, not a 422 of the schema.
KeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description=f"Retry-safe POST: 1..{MAX_KEY_CHARS} printable ASCII characters.",
    ),
]


def idempotency_key(
    header: str | None, request: Request, caller: Caller, body: BaseModel
) -> IdempotencyKey | None:
    """The key the service derives for this request (its route is the request's
    path), or None without the header; what ``app.state.idempotency_in_flight``
    holds while the request runs."""
    return request_key(caller, header, route=request.url.path, body=body, method=request.method)
