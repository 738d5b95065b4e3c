"""The directory methods of the in-process ledger (admin): who may approve
what, through which channel, with which executor build, on which target.

Each put is idempotent (unchanged values append nothing and return the same
revision) and returns the record as ``PUT /directory/...`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.bootstrap import Ledger
from api.http.schemas.directory import (
    ActorIn,
    ActorOut,
    ChannelBindingIn,
    ChannelBindingOut,
    ExecutorBuildIn,
    ExecutorBuildOut,
    GrantIn,
    GrantOut,
    IdentityBindingIn,
    IdentityBindingOut,
    TargetIn,
    TargetOut,
)
from api.service import directory
from api.service.principal import Principal, Role
from api.service.validation import parse
from domain.directory import DeliveryMode


class DirectoryMethods:
    """Mixed into :class:`api.embedded.EmbeddedLedger`."""

    @property
    def wiring(self) -> Ledger:
        raise NotImplementedError

    def _as(self, role: Role) -> Principal:
        raise NotImplementedError

    def put_actor(
        self, actor_id: str, *, enabled: bool = True, groups: Sequence[str] = ()
    ) -> ActorOut:
        """Create, enable or disable an actor; ``groups`` are what policies see."""
        body = parse(ActorIn, {"enabled": enabled, "groups": list(groups)})
        return directory.put_actor(self.wiring, self._as(Role.ADMIN), actor_id, body)

    def get_actor(self, actor_id: str) -> ActorOut:
        return directory.get_actor(self.wiring, self._as(Role.ADMIN), actor_id)

    def put_identity_binding(
        self,
        binding_id: str,
        *,
        actor_id: str,
        channel: str,
        external_id: str,
        active: bool = True,
    ) -> IdentityBindingOut:
        """Bind an actor to one external identity on one channel."""
        body = parse(
            IdentityBindingIn,
            {
                "actor_id": actor_id,
                "channel": channel,
                "external_id": external_id,
                "active": active,
            },
        )
        return directory.put_identity_binding(self.wiring, self._as(Role.ADMIN), binding_id, body)

    def get_identity_binding(self, binding_id: str) -> IdentityBindingOut:
        return directory.get_identity_binding(self.wiring, self._as(Role.ADMIN), binding_id)

    def put_channel_binding(
        self, binding_id: str, *, conversation_key: str, channel: str, active: bool = True
    ) -> ChannelBindingOut:
        """Bind one conversation on one channel as a place approvals may come from."""
        body = parse(
            ChannelBindingIn,
            {"conversation_key": conversation_key, "channel": channel, "active": active},
        )
        return directory.put_channel_binding(self.wiring, self._as(Role.ADMIN), binding_id, body)

    def get_channel_binding(self, binding_id: str) -> ChannelBindingOut:
        return directory.get_channel_binding(self.wiring, self._as(Role.ADMIN), binding_id)

    def put_grant(self, actor_id: str, permission: str, *, granted: bool = True) -> GrantOut:
        """Grant (or with ``granted=False`` revoke) one catalogue permission."""
        body = parse(GrantIn, {"granted": granted})
        return directory.put_grant(self.wiring, self._as(Role.ADMIN), actor_id, permission, body)

    def get_grant(self, actor_id: str, permission: str) -> GrantOut:
        return directory.get_grant(self.wiring, self._as(Role.ADMIN), actor_id, permission)

    def put_executor_build(
        self,
        capability: str,
        build_digest: str,
        *,
        delivery_mode: DeliveryMode | str,
        available: bool = True,
    ) -> ExecutorBuildOut:
        """Allow (or with ``available=False`` withdraw) one exact executor build."""
        body = parse(
            ExecutorBuildIn, {"delivery_mode": _value(delivery_mode), "available": available}
        )
        return directory.put_executor_build(
            self.wiring, self._as(Role.ADMIN), capability, build_digest, body
        )

    def get_executor_build(self, capability: str, build_digest: str) -> ExecutorBuildOut:
        return directory.get_executor_build(
            self.wiring, self._as(Role.ADMIN), capability, build_digest
        )

    def put_target(self, target_id: str, *, revision: str) -> TargetOut:
        """Set a target's current revision (proposals name the base revision)."""
        body = parse(TargetIn, {"revision": revision})
        return directory.put_target(self.wiring, self._as(Role.ADMIN), target_id, body)

    def get_target(self, target_id: str) -> TargetOut:
        return directory.get_target(self.wiring, self._as(Role.ADMIN), target_id)


def _value(mode: Any) -> Any:
    """An enum member as its value (the schema takes what JSON would carry)."""
    return getattr(mode, "value", mode)
