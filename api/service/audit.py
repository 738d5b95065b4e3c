"""Audit, for admins: one attempt's verified timeline with its proposal and
directory context, and the digests over every stream head (take one, check
today's ledger against one, prove one event).
"""

from __future__ import annotations

from typing import Any

from adapters.audit import digests
from adapters.audit.digests import Verdict, prove, take_digest, verify_consistency, verify_ledger
from adapters.bootstrap import Ledger
from api.service.principal import Principal, Role, require_role
from domain.digest import Digest
from domain.errors import NotFound
from domain.spec import ATTEMPT_ID_PREFIX
from projections.audit import audit_attempt

MAX_ID_CHARS = 80


def attempt_report(ledger: Ledger, principal: Principal, attempt_id: str) -> dict[str, Any]:
    """The redacted timeline of an attempt, anchored to its status view's head,
    with the timelines of its proposal and directory records and the verdict of
    every hash chain. NotFound when there is no such attempt."""
    require_role(principal, Role.ADMIN)
    if len(attempt_id) > MAX_ID_CHARS or not attempt_id.startswith(ATTEMPT_ID_PREFIX):
        raise NotFound("no such attempt")
    report = audit_attempt(ledger.store, ledger.views, attempt_id)
    if not report["attempt"]["events"] and report["attempt"]["first_bad_version"] is None:
        raise NotFound("no such attempt")
    return report


def digest(ledger: Ledger, principal: Principal) -> Digest:
    """A digest of every stream head now (Ed25519-signed when a signing key is set)."""
    require_role(principal, Role.ADMIN)
    return take_digest(ledger.settings, ledger.store, ledger.clock)


def verify(
    ledger: Ledger, principal: Principal, digest: Digest, *, since: Digest | None = None
) -> Verdict:
    """Does today's ledger extend ``digest``? With ``since``: does ``digest``
    extend that older one? The verdict names the first stream that was
    truncated, deleted, rewritten or reordered."""
    require_role(principal, Role.ADMIN)
    if since is not None:
        return verify_consistency(ledger.store, since, digest)
    return verify_ledger(ledger.store, digest)


def restore_note(ledger: Ledger, principal: Principal, digest: Digest) -> str:
    """For a ledger found behind ``digest``: the recorded restore that explains
    it, or that none is recorded (design.md 5.11). Admins only."""
    require_role(principal, Role.ADMIN)
    return digests.restore_note(ledger.store, digest)


def inclusion_proof(
    ledger: Ledger, principal: Principal, digest: Digest, stream_id: str, version: int
) -> dict[str, Any]:
    """An inclusion proof of one event against ``digest`` (checked offline later)."""
    require_role(principal, Role.ADMIN)
    return prove(ledger.store, digest, stream_id, version)
