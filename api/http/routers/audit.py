"""Audit digests (design.md 5.11): the signed Merkle root over every stream head."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api.http.deps import AdminCaller, LedgerDep
from api.http.errors import error_responses
from api.service import audit

router = APIRouter(prefix="/audit", tags=["audit"], responses=error_responses(401, 403, 503))


@router.get("/digest")
def audit_digest(caller: AdminCaller, ledger: LedgerDep) -> dict[str, Any]:
    """A digest of every stream head now (Ed25519-signed when a signing key is set).

    Keep it where the ledger's writers cannot reach; ``ledger audit verify``
    later proves the ledger still extends it.
    """
    return audit.digest(ledger, caller).to_json()
