"""Directory records: who may approve what, through which channel, with which build.

Every record is its own event-sourced stream, so each grant, revocation and
revision change is audited. Approval reads them and condition-checks in its
commit that none changed in between; the worker reads them again before
dispatch (I7).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from eventsourcing.domain import event
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from domain.base import LedgerAggregate
from domain.errors import InvalidInput
from domain.problems import from_pydantic
from domain.spec import DIGEST_PATTERN, NAME_PATTERN, nfc, plain_id


class DeliveryMode(StrEnum):
    """How uncertainty about an executor call can be resolved."""

    PROVIDER_IDEMPOTENCY = "provider_idempotency"
    CORRELATION_LOOKUP = "correlation_lookup"
    OPERATOR_RECONCILIATION_ONLY = "operator_reconciliation_only"


class DirectoryKind(StrEnum):
    """The kinds of directory record; each is a stream id prefix."""

    ACTOR = "actor"
    IDENTITY_BINDING = "identity-binding"
    CHANNEL_BINDING = "channel-binding"
    PERMISSION_GRANT = "grant"
    EXECUTOR_BUILD = "executor-build"
    TARGET = "target"
    POLICY_SET = "policy-set"
    STANDING_GRANT = "standing-grant"
    STANDING_GRANT_INDEX = "standing-grants"
    STANDING_GRANT_USES = "standing-grant-uses"
    STANDING_GRANT_FENCE = "standing-grant-fence"


Ident = Annotated[
    str,
    BeforeValidator(nfc),
    Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]*$"),
]
ShortText = Annotated[str, BeforeValidator(plain_id), Field(min_length=1, max_length=256)]
ChannelName = Annotated[str, BeforeValidator(nfc), Field(pattern=NAME_PATTERN)]


class _Values(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


MAX_GROUPS = 32


def _group_set(value: Any) -> Any:
    """Groups are a set: sorted and without repeats, so the same set is the same record."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return sorted(set(value))
    return value


class ActorValues(_Values):
    """An end user who can approve; disabled actors can approve nothing.

    ``groups``: what policies see as the principal's groups (``Group::"<name>"``
    parents and the ``groups`` attribute); none when absent."""

    enabled: bool
    groups: Annotated[list[Ident], BeforeValidator(_group_set), Field(max_length=MAX_GROUPS)] = (
        Field(default_factory=list)
    )


class IdentityBindingValues(_Values):
    """Binds an actor to one external identity on one channel."""

    actor_id: Ident
    channel: ChannelName
    external_id: ShortText
    active: bool


class ChannelBindingValues(_Values):
    """Binds one conversation on one channel as a place approvals may come from."""

    conversation_key: ShortText
    channel: ChannelName
    active: bool


class PermissionGrantValues(_Values):
    """Whether an actor holds one core permission."""

    granted: bool


class ExecutorBuildValues(_Values):
    """An exact executor build for a capability, with its delivery mode."""

    delivery_mode: Annotated[DeliveryMode, Field(strict=False)]
    available: bool


class TargetValues(_Values):
    """The current revision of a canonical target."""

    revision: Annotated[str, BeforeValidator(plain_id), Field(min_length=1, max_length=128)]


class PolicySetValues(_Values):
    """The ledger's Cedar policy set: its text, digest and policies (``domain.policy``)."""

    text: Annotated[str, Field(max_length=64 * 1024)]
    digest: Annotated[str, Field(pattern=DIGEST_PATTERN)]
    policies: list[dict[str, Any]]


class StandingGrantValues(_Values):
    """One standing grant ("allow always"; ``domain.standing_grants``)."""

    grant_id: Ident
    actor_id: Ident
    capability: ChannelName
    conditions: list[dict[str, Any]]
    expires_at: str
    max_uses: int
    uses: int
    revoked: bool
    granted_by: dict[str, Any]
    granted_at: str
    destination: str | None = None
    effect: str | None = None
    revoked_by: dict[str, Any] | None = None
    revoked_at: str | None = None
    use_shards: int | None = None
    """Set: its uses are counted on that many use shards (``domain.standing_grants``),
    never on this record (whose ``uses`` then says none is left on it); absent:
    each use is a ``Used`` event of this record."""
    fences: int | None = None
    """With ``use_shards``: how many fences its revocation makes."""


class StandingGrantUsesValues(_Values):
    """One use shard of a standing grant: its part of the grant's uses (``quota``)
    and how many it has given."""

    grant_id: Ident
    shard: int
    quota: int
    uses: int


class StandingGrantFenceValues(_Values):
    """One of a grant's fences, made by its revocation: no use of the shards it
    covers (``shard mod fences``) commits once it exists."""

    grant_id: Ident
    fence: int
    revoked_at: str


class StandingGrantIndexValues(_Values):
    """The ids of an actor's standing grants (where a proposal looks for one)."""

    actor_id: Ident
    grant_ids: list[Ident]


VALUE_MODELS: dict[DirectoryKind, type[_Values]] = {
    DirectoryKind.ACTOR: ActorValues,
    DirectoryKind.IDENTITY_BINDING: IdentityBindingValues,
    DirectoryKind.CHANNEL_BINDING: ChannelBindingValues,
    DirectoryKind.PERMISSION_GRANT: PermissionGrantValues,
    DirectoryKind.EXECUTOR_BUILD: ExecutorBuildValues,
    DirectoryKind.TARGET: TargetValues,
    DirectoryKind.POLICY_SET: PolicySetValues,
    DirectoryKind.STANDING_GRANT: StandingGrantValues,
    DirectoryKind.STANDING_GRANT_INDEX: StandingGrantIndexValues,
    DirectoryKind.STANDING_GRANT_USES: StandingGrantUsesValues,
    DirectoryKind.STANDING_GRANT_FENCE: StandingGrantFenceValues,
}


def validate_values(kind: DirectoryKind, data: Any) -> dict[str, Any]:
    """Validate untrusted values for a kind; returns the JSON-ready mapping.

    A value left at its default (an actor without groups) is left out, so a
    record written before the field existed reads as the same values."""
    try:
        model = VALUE_MODELS[kind].model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(problems=from_pydantic(exc.errors(include_input=False))) from exc
    return model.model_dump(mode="json", exclude_defaults=True)


def _one_value(model: type[BaseModel], value: Any, what: str, location: str) -> Any:
    try:
        return model.model_validate({"value": value}).value  # type: ignore[attr-defined]
    except ValidationError as exc:
        message = exc.errors(include_input=False)[0]["msg"]
        raise InvalidInput.at("/" + what, message, location) from exc


def validate_ident(value: Any, what: str, location: str = "path") -> str:
    """Validate one id (actor id, binding id, target id): a path parameter unless
    ``location`` says otherwise (``query``, ``claim``)."""
    return str(_one_value(_IdentModel, value, what, location))


def validate_name(value: Any, what: str, location: str = "path") -> str:
    """Validate a lowercase name (capability, permission)."""
    return str(_one_value(_NameModel, value, what, location))


def validate_digest(value: Any, what: str, location: str = "path") -> str:
    """Validate a ``sha256:<64 hex>`` digest."""
    return str(_one_value(_DigestModel, value, what, location))


class _IdentModel(BaseModel):
    value: Ident


class _NameModel(BaseModel):
    value: ChannelName


class _DigestModel(BaseModel):
    value: Annotated[str, Field(pattern=DIGEST_PATTERN)]


def record_id(kind: DirectoryKind, *parts: str) -> str:
    """The stream id of a directory record, e.g. ``grant:alice:tasks.write``."""
    return ":".join([kind.value, *parts])


def actor_record_id(actor_id: str) -> str:
    return record_id(DirectoryKind.ACTOR, actor_id)


def identity_binding_record_id(binding_id: str) -> str:
    return record_id(DirectoryKind.IDENTITY_BINDING, binding_id)


def channel_binding_record_id(binding_id: str) -> str:
    return record_id(DirectoryKind.CHANNEL_BINDING, binding_id)


def grant_record_id(actor_id: str, permission: str) -> str:
    return record_id(DirectoryKind.PERMISSION_GRANT, actor_id, permission)


def executor_build_record_id(capability: str, build_digest: str) -> str:
    return record_id(DirectoryKind.EXECUTOR_BUILD, capability, build_digest)


def target_record_id(target_id: str) -> str:
    return record_id(DirectoryKind.TARGET, target_id)


def is_directory_record_id(stream_id: str) -> bool:
    """Whether a stream id names a directory record (``<kind>:...``)."""
    kind, sep, _ = stream_id.partition(":")
    return bool(sep) and kind in _KINDS


_KINDS = frozenset(k.value for k in DirectoryKind)

POLICY_SET_RECORD_ID = record_id(DirectoryKind.POLICY_SET, "default")
"""The one policy set of a ledger (its version is the set's version)."""


def standing_grant_record_id(grant_id: str) -> str:
    return record_id(DirectoryKind.STANDING_GRANT, grant_id)


def standing_grant_index_id(actor_id: str) -> str:
    return record_id(DirectoryKind.STANDING_GRANT_INDEX, actor_id)


def standing_grant_uses_id(grant_id: str, shard: int) -> str:
    return record_id(DirectoryKind.STANDING_GRANT_USES, grant_id, f"{shard:02d}")


def standing_grant_fence_id(grant_id: str, shard: int) -> str:
    return record_id(DirectoryKind.STANDING_GRANT_FENCE, grant_id, f"{shard:02d}")


class DirectoryRecord(LedgerAggregate):
    """One directory record; its values change only by appended events."""

    @staticmethod
    def create_id(record_id: str, **_: Any) -> str:
        return record_id

    @event("Registered")
    def __init__(self, record_id: str, kind: str, values: dict[str, Any], at: str) -> None:
        self.kind = DirectoryKind(kind)
        self.values = dict(values)
        self.updated_at = at

    def update(self, values: dict[str, Any], at: str) -> bool:
        """Record new values; returns False (and appends nothing) when unchanged."""
        if values == self.values:
            return False
        self._changed(values=values, at=at)
        return True

    @event("Changed")
    def _changed(self, values: dict[str, Any], at: str) -> None:
        self.values = dict(values)
        self.updated_at = at

    def record_use(
        self, values: dict[str, Any], *, grant_id: str, proposal_id: str, version: int, at: str
    ) -> None:
        """A standing grant approved a proposal: the record's new values (its use
        counted) in an event of its own kind, appended in the claim's commit."""
        self._used(
            values=values, grant_id=grant_id, proposal_id=proposal_id, version=version, at=at
        )

    @event("Used")
    def _used(
        self, values: dict[str, Any], grant_id: str, proposal_id: str, version: int, at: str
    ) -> None:
        self.values = dict(values)
        self.updated_at = at

    def flag(self, name: str) -> bool:
        """A boolean value of the record (``enabled``, ``active``, ``granted``...)."""
        return bool(self.values.get(name, False))

    def text(self, name: str) -> str:
        """A string value of the record."""
        return str(self.values.get(name, ""))
