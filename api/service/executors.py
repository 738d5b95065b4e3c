"""The executors this process can run: one entry per registered build, and the
listing proposers read to fill a spec (``GET /executors``, ``ledger executors --json``)."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.bootstrap import Ledger
from adapters.executors.registry import RegistryEntry
from api.http.schemas.executors import ExecutorListOut, ExecutorOut
from api.service.principal import Principal, Role, require_role
from domain.directory import DirectoryKind, DirectoryRecord, executor_build_record_id
from domain.ports import EventStore

READERS = (Role.PROPOSER, Role.ADMIN)
"""Who may list the executors: whoever writes specs, and admins."""


def newest_first(entries: Sequence[RegistryEntry]) -> list[RegistryEntry]:
    """THE order of executor builds everywhere they are listed: by capability,
    and within one capability the current build before the draining ones
    (kept only for the work already bound to them), each group newest first.

    The registry records no age of a build, so "newer" is "registered later":
    the loader registers the fakes, then the plugins, then the executors
    file's entries in file order (``adapters/executors/loader.py``), so a
    build added below another in the file counts as newer. Anything that
    learns more about a build changes the key here and nowhere else.
    """
    ranked = sorted(
        enumerate(entries), key=lambda item: (item[1].capability, item[1].draining, -item[0])
    )
    return [entry for _, entry in ranked]


def list_executors(ledger: Ledger) -> list[RegistryEntry]:
    """Every registered executor build (capability, build digest, delivery
    mode, kind), in :func:`newest_first` order. Names and digests only:
    nothing of an executor's configuration or secrets."""
    return newest_first(ledger.registry.entries())


def _available(store: EventStore, entry: RegistryEntry) -> bool:
    """A new proposal may name this build: it is current (not draining) and the
    directory allows exactly it with the delivery mode it is hosted with."""
    if entry.draining:
        return False
    record = store.get(
        DirectoryRecord, executor_build_record_id(entry.capability, entry.build_digest)
    )
    return (
        record is not None
        and record.kind is DirectoryKind.EXECUTOR_BUILD
        and record.flag("available")
        and record.text("delivery_mode") == entry.delivery_mode.value
    )


def executor_listing(ledger: Ledger, principal: Principal) -> ExecutorListOut:
    """The builds this process hosts, newest first per capability, each with
    whether a proposal may name it now (the directory allows it)."""
    require_role(principal, *READERS)
    return ExecutorListOut(
        items=[
            ExecutorOut(
                capability=entry.capability,
                executor_build=entry.build_digest,
                delivery_mode=entry.delivery_mode,
                available=_available(ledger.store, entry),
                state=entry.state,
                content_schema=(
                    dict(entry.content_schema) if entry.content_schema is not None else None
                ),
                schema_digest=entry.schema_digest,
            )
            for entry in list_executors(ledger)
        ]
    )
