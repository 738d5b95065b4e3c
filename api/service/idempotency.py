"""``Idempotency-Key`` for every entry point: the key of one request, scoped to
its caller, and the keys in flight.

The stored semantics live in ``domain.services.idempotency``. Here a raw key
becomes an :class:`IdempotencyKey` fingerprinted with the operation's route
(the HTTP path, whichever entry point called) and the request schema, so a
retry through HTTP of a request first made in-process gets the first answer,
and the reverse. While a request holds its key, a duplicate in this process
gets ``IdempotencyKeyInUse`` (409); a duplicate in another process converges
on the first answer through the create-only key item instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import BaseModel

from adapters.bootstrap import Ledger
from api.service.principal import Principal
from domain.errors import IdempotencyKeyRefused
from domain.services.idempotency import MAX_KEY_CHARS, IdempotencyKey

API_PREFIX = "/api/conversational"
"""Where the HTTP API is served; the routes below are fingerprinted under it."""


def request_key(
    principal: Principal,
    key: str | None,
    *,
    route: str,
    body: BaseModel,
    method: str = "POST",
) -> IdempotencyKey | None:
    """The caller's key for one request (``route``: its full HTTP path), or None
    without a key; ``IdempotencyKeyRefused`` for a key that cannot be one."""
    if key is None:
        return None
    if len(key) > MAX_KEY_CHARS:
        raise IdempotencyKeyRefused()
    return IdempotencyKey.of(
        key,
        scope=f"{principal.role.value}:{principal.subject}",
        method=method,
        route=route,
        body=body.model_dump(mode="json"),
    )


@contextmanager
def held(
    ledger: Ledger,
    principal: Principal,
    key: str | None,
    *,
    route: str,
    body: BaseModel,
) -> Iterator[IdempotencyKey | None]:
    """The request's key (``route`` under :data:`API_PREFIX`), held in flight
    for the block."""
    found = request_key(principal, key, route=API_PREFIX + route, body=body)
    with ledger.in_flight.hold(found):
        yield found
