"""The executors this process can run: one entry per registered build."""

from __future__ import annotations

from adapters.bootstrap import Ledger
from adapters.executors.registry import RegistryEntry


def list_executors(ledger: Ledger) -> list[RegistryEntry]:
    """Every registered executor build (capability, build digest, delivery
    mode, kind), as ``ledger executors`` prints them. Names and digests only:
    nothing of an executor's configuration or secrets."""
    return sorted(ledger.registry.entries(), key=lambda e: (e.capability, e.build_digest))
