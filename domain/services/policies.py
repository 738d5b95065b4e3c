"""The policy set's use cases: read it, apply a new one (docs/policies.md).

The set is one directory record, ``policy-set:default``: each apply that
changes it is one appended event (``Registered``, then ``Changed``), so every
version is audited (``ledger audit show policy-set:default``) and the
record's version is the set's version. An apply with the same text appends
nothing. ``expected_version`` makes an apply conditional (optimistic), so two
admins editing at once cannot overwrite each other silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domain.directory import POLICY_SET_RECORD_ID, DirectoryKind, DirectoryRecord, validate_values
from domain.errors import ConcurrencyConflict, StalePolicySet
from domain.policy import CompiledPolicies, compile_policies, compiled
from domain.ports import Clock, Commit, EventStore
from domain.services.read_cache import ReadCache, commit
from domain.services.retry import retry_on_conflict
from domain.timeutil import format_utc

_NO_CACHE = ReadCache(0)


@dataclass(frozen=True)
class PolicySetView:
    """The policy set as callers see it; version 0 and no policies when none was applied."""

    version: int
    digest: str | None
    text: str
    policies: list[dict[str, Any]] = field(default_factory=list)
    updated_at: str | None = None
    changed: bool = False

    @property
    def configured(self) -> bool:
        return bool(self.policies)


def _view(record: DirectoryRecord | None, *, changed: bool = False) -> PolicySetView:
    if record is None:
        return PolicySetView(version=0, digest=None, text="")
    values = record.values
    return PolicySetView(
        version=record.version,
        digest=values.get("digest") if values.get("policies") else None,
        text=str(values.get("text", "")),
        policies=[dict(p) for p in values.get("policies", ())],
        updated_at=record.updated_at,
        changed=changed,
    )


def get_policy_set(store: EventStore) -> PolicySetView:
    return _view(store.get(DirectoryRecord, POLICY_SET_RECORD_ID))


def current_policies(store: EventStore) -> CompiledPolicies | None:
    """The configured set, compiled; None when there is none (or it is empty)."""
    record = store.get(DirectoryRecord, POLICY_SET_RECORD_ID)
    if record is None or not str(record.values.get("text", "")).strip():
        return None
    return compiled(str(record.values["text"]), str(record.values.get("digest") or "") or None)


def policy_values(policies: CompiledPolicies) -> dict[str, Any]:
    return validate_values(
        DirectoryKind.POLICY_SET,
        {
            "text": policies.text,
            "digest": policies.digest,
            "policies": [p.as_dict() for p in policies.policies],
        },
    )


def apply_policy_set(
    store: EventStore,
    clock: Clock,
    text: str,
    *,
    expected_version: int | None = None,
    cache: ReadCache | None = None,
) -> PolicySetView:
    """Validate ``text`` (``InvalidPolicySet``) and make it the policy set.

    ``expected_version``: the version the caller's edit started from (0: none
    yet); ``StalePolicySet`` when it has moved. Unchanged text appends nothing.
    With ``cache``, the new version is written through (this process's next
    decision sees it at once)."""
    policies = compile_policies(text)
    values = policy_values(policies)

    def once() -> PolicySetView:
        at = format_utc(clock.now())
        record = store.get(DirectoryRecord, POLICY_SET_RECORD_ID)
        current = 0 if record is None else record.version
        if expected_version is not None and expected_version != current:
            raise StalePolicySet(
                f"The policy set is at version {current}, not {expected_version}; "
                "read it again and apply the edit to that version."
            )
        if record is None:
            record = DirectoryRecord(
                record_id=POLICY_SET_RECORD_ID,
                kind=DirectoryKind.POLICY_SET.value,
                values=values,
                at=at,
            )
        elif not record.update(values, at=at):
            return _view(record)
        commit(store, _NO_CACHE if cache is None else cache, Commit(aggregates=[record]))
        return _view(record, changed=True)

    def contended() -> PolicySetView:
        raise ConcurrencyConflict(POLICY_SET_RECORD_ID)

    return retry_on_conflict(once, exhausted=contended)
