"""Directory admin schemas: strict request bodies, flat response records.

Request bodies reject unknown fields and wrong types (``"yes"`` is not a
boolean) and bound every string; the domain validates the values again.
A response is ``{"id", "kind", "revision", "updated_at", **values}`` where
``revision`` is the record's stream version. A target's own revision string
is returned as ``target_revision`` so it cannot clash with that.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from domain.directory import ChannelName, DeliveryMode, Ident, ShortText
from domain.services.directory import RecordView
from domain.spec import plain_id

TargetRevision = Annotated[str, BeforeValidator(plain_id), Field(min_length=1, max_length=128)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ActorIn(_Body):
    """Enable or disable an actor; ``groups`` are what policies see of it
    (``principal in Group::"<name>"``, ``principal.groups``)."""

    enabled: bool
    groups: Annotated[list[Ident], Field(max_length=32)] = Field(default_factory=list)


class IdentityBindingIn(_Body):
    """Bind an actor to one external identity on one channel."""

    actor_id: Ident
    channel: ChannelName
    external_id: ShortText
    active: bool


class ChannelBindingIn(_Body):
    """Bind one conversation on one channel as a place approvals may come from."""

    conversation_key: ShortText
    channel: ChannelName
    active: bool


class GrantIn(_Body):
    """Grant or revoke one catalogue permission."""

    granted: bool


class ExecutorBuildIn(_Body):
    """Register or withdraw one exact executor build."""

    # JSON carries the enum's value; strict mode would demand an enum instance.
    delivery_mode: Annotated[DeliveryMode, Field(strict=False)]
    available: bool


class TargetIn(_Body):
    """Set the current revision of a canonical target."""

    revision: TargetRevision


class RecordOut(BaseModel):
    """Common fields of every directory record."""

    id: str = Field(description="The record's id within its kind (the path ids, ':'-joined).")
    kind: str
    revision: int = Field(description="Stream version; bumps on every change.")
    updated_at: str

    @classmethod
    def from_view(cls, view: RecordView, **extra: Any) -> Self:
        """Flatten a record view: common fields first, then its values."""
        return cls.model_validate(
            {
                "id": view.record_id.removeprefix(f"{view.kind.value}:"),
                "kind": view.kind.value,
                "revision": view.revision,
                "updated_at": view.updated_at,
                **cls.value_fields(view.values),
                **extra,
            }
        )

    @classmethod
    def value_fields(cls, values: dict[str, Any]) -> dict[str, Any]:
        return values


class ActorOut(RecordOut):
    """An actor record."""

    enabled: bool
    groups: list[str] = Field(default_factory=list)


class IdentityBindingOut(RecordOut):
    """An identity binding record."""

    actor_id: str
    channel: str
    external_id: str
    active: bool


class ChannelBindingOut(RecordOut):
    """A channel binding record."""

    conversation_key: str
    channel: str
    active: bool


class GrantOut(RecordOut):
    """A permission grant record."""

    actor_id: str
    permission: str
    granted: bool


class ExecutorBuildOut(RecordOut):
    """An executor build record."""

    capability: str
    build_digest: str
    delivery_mode: DeliveryMode
    available: bool


class TargetOut(RecordOut):
    """A target record."""

    target_revision: str

    @classmethod
    def value_fields(cls, values: dict[str, Any]) -> dict[str, Any]:
        return {"target_revision": values["revision"]}
