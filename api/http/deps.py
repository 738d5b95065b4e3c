"""Dependency aliases every router uses: the ledger, the settings and the caller.

Use them as parameter annotations, e.g. ``def route(caller: AdminCaller, ledger:
LedgerDep)``; for a whole router, ``dependencies=[Depends(require_admin)]``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from adapters.bootstrap import Ledger
from adapters.settings import Settings
from api.http.auth import Caller, Role, TokenVerifier
from domain.errors import Forbidden, Unauthenticated

bearer_scheme = HTTPBearer(
    auto_error=False,
    description=(
        "A JWT with `exp`, a subject (`sub`) and a `role` (actor, channel, proposer, admin, "
        "metrics): HS256, RS256 (PEM keys) or RS256/ES256 from the identity provider's "
        "JWKS, with the configured `iss` and `aud`. `ledger token` mints development tokens."
    ),
)


# The dependencies below only read what the app holds (and verify a JWT, a few
# microseconds of HMAC): ``async def`` runs them on the event loop, where a
# plain ``def`` would cost each one a hop to the thread pool and back on every
# request (three of the four hops a status read made; measured in
# bench/bench_http.py).


async def get_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


async def get_ledger(request: Request) -> Ledger:
    """The wired ledger (store, clock, tokens, services context)."""
    ledger: Ledger = request.app.state.ledger
    return ledger


async def get_verifier(request: Request) -> TokenVerifier:
    verifier: TokenVerifier = request.app.state.verifier
    return verifier


SettingsDep = Annotated[Settings, Depends(get_settings)]
LedgerDep = Annotated[Ledger, Depends(get_ledger)]
VerifierDep = Annotated[TokenVerifier, Depends(get_verifier)]


async def current_caller(
    verifier: VerifierDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Caller:
    """The authenticated caller (401 Unauthenticated without a valid bearer token).

    Verified on the event loop; only when the identity provider's key set must
    be fetched first (an unknown ``kid``, at most once per refresh interval)
    does the check move to a worker thread, so the fetch never blocks the loop."""
    if credentials is None:
        raise Unauthenticated("Missing bearer token.")
    caller = verifier.verify_cached(credentials.credentials)
    if caller is None:
        caller = await run_in_threadpool(verifier.verify, credentials.credentials)
    return caller


AnyCaller = Annotated[Caller, Depends(current_caller)]


def require_roles(*roles: Role) -> Callable[[Caller], Coroutine[Any, Any, Caller]]:
    """A dependency admitting only the given roles (403 Forbidden for the others)."""
    allowed = frozenset(roles)

    async def dependency(caller: AnyCaller) -> Caller:
        if caller.role not in allowed:
            raise Forbidden()
        return caller

    dependency.__name__ = "require_" + "_or_".join(sorted(r.value for r in allowed))
    return dependency


require_admin = require_roles(Role.ADMIN)
require_actor = require_roles(Role.ACTOR)
require_channel = require_roles(Role.CHANNEL)
require_proposer = require_roles(Role.PROPOSER)
require_metrics = require_roles(Role.METRICS)

AdminCaller = Annotated[Caller, Depends(require_admin)]
ActorCaller = Annotated[Caller, Depends(require_actor)]
ChannelCaller = Annotated[Caller, Depends(require_channel)]
"""A channel caller: a per-conversation credential (``caller.provenance``), a
channel service (``caller.channel``), or both."""
ProposerCaller = Annotated[Caller, Depends(require_proposer)]
