"""The ``Idempotency-Key`` header: parsed, scoped to the caller, held while in flight.

The stored semantics live in ``domain.services.idempotency``; this module adds
what only a server process can know: a duplicate that arrives while the first
request with the same key is still being processed in this process gets 409
``idempotency_key_in_use`` (a duplicate in another process converges on the
first answer through the create-only key item instead).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import Header, Request
from pydantic import BaseModel

from api.http.auth import Caller
from domain.errors import IdempotencyKeyInUse, IdempotencyKeyRefused
from domain.services.idempotency import MAX_KEY_CHARS, IdempotencyKey

# No length limit here: a longer value gets the uniform refusal body, not a 422 of the schema.
KeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description=f"Retry-safe POST: 1..{MAX_KEY_CHARS} printable ASCII characters.",
    ),
]


class InFlight:
    """Keys of the requests being processed right now in this process."""

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, key: IdempotencyKey | None) -> Iterator[None]:
        if key is None:
            yield
            return
        with self._lock:
            if key.lookup_key in self._keys:
                raise IdempotencyKeyInUse()
            self._keys.add(key.lookup_key)
        try:
            yield
        finally:
            with self._lock:
                self._keys.discard(key.lookup_key)


def in_flight(request: Request) -> InFlight:
    """The app's registry (created with the app)."""
    registry: InFlight = request.app.state.idempotency_in_flight
    return registry


def idempotency_key(
    header: str | None, request: Request, caller: Caller, body: BaseModel
) -> IdempotencyKey | None:
    """The caller's key for this request, or None without the header."""
    if header is None:
        return None
    if len(header) > MAX_KEY_CHARS:
        raise IdempotencyKeyRefused()
    return IdempotencyKey.of(
        header,
        scope=f"{caller.role.value}:{caller.subject}",
        method=request.method,
        route=request.url.path,
        body=body.model_dump(mode="json"),
    )
