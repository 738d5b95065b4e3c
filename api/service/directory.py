"""The directory, for admins: idempotent put and get of each kind of record.

A put with unchanged values appends nothing and returns the same revision.
Ids are validated here (the same rules as the records themselves), so a bad
one is ``InvalidInput`` whichever entry point sent it.
"""

from __future__ import annotations

from pydantic import BaseModel

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
from api.service.principal import Principal, Role, require_role
from domain.directory import (
    DirectoryKind,
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    target_record_id,
    validate_digest,
    validate_ident,
    validate_name,
)
from domain.services.directory import RecordView, check_permission, get_record, put_record


def _put(ledger: Ledger, kind: DirectoryKind, record_id: str, body: BaseModel) -> RecordView:
    return put_record(
        ledger.store,
        ledger.clock,
        cache=ledger.read_cache,
        kind=kind,
        record_id=record_id,
        values=body.model_dump(),
    )


def _get(ledger: Ledger, kind: DirectoryKind, record_id: str) -> RecordView:
    return get_record(ledger.store, kind, record_id)


def put_actor(ledger: Ledger, principal: Principal, actor_id: str, body: ActorIn) -> ActorOut:
    """Create, enable or disable an actor."""
    require_role(principal, Role.ADMIN)
    record_id = actor_record_id(validate_ident(actor_id, "actor_id"))
    return ActorOut.from_view(_put(ledger, DirectoryKind.ACTOR, record_id, body))


def get_actor(ledger: Ledger, principal: Principal, actor_id: str) -> ActorOut:
    """Read an actor."""
    require_role(principal, Role.ADMIN)
    record_id = actor_record_id(validate_ident(actor_id, "actor_id"))
    return ActorOut.from_view(_get(ledger, DirectoryKind.ACTOR, record_id))


def put_identity_binding(
    ledger: Ledger, principal: Principal, binding_id: str, body: IdentityBindingIn
) -> IdentityBindingOut:
    """Create or change an identity binding."""
    require_role(principal, Role.ADMIN)
    record_id = identity_binding_record_id(validate_ident(binding_id, "binding_id"))
    view = _put(ledger, DirectoryKind.IDENTITY_BINDING, record_id, body)
    return IdentityBindingOut.from_view(view)


def get_identity_binding(
    ledger: Ledger, principal: Principal, binding_id: str
) -> IdentityBindingOut:
    """Read an identity binding."""
    require_role(principal, Role.ADMIN)
    record_id = identity_binding_record_id(validate_ident(binding_id, "binding_id"))
    view = _get(ledger, DirectoryKind.IDENTITY_BINDING, record_id)
    return IdentityBindingOut.from_view(view)


def put_channel_binding(
    ledger: Ledger, principal: Principal, binding_id: str, body: ChannelBindingIn
) -> ChannelBindingOut:
    """Create or change a channel binding."""
    require_role(principal, Role.ADMIN)
    record_id = channel_binding_record_id(validate_ident(binding_id, "binding_id"))
    view = _put(ledger, DirectoryKind.CHANNEL_BINDING, record_id, body)
    return ChannelBindingOut.from_view(view)


def get_channel_binding(ledger: Ledger, principal: Principal, binding_id: str) -> ChannelBindingOut:
    """Read a channel binding."""
    require_role(principal, Role.ADMIN)
    record_id = channel_binding_record_id(validate_ident(binding_id, "binding_id"))
    view = _get(ledger, DirectoryKind.CHANNEL_BINDING, record_id)
    return ChannelBindingOut.from_view(view)


def put_grant(
    ledger: Ledger, principal: Principal, actor_id: str, permission: str, body: GrantIn
) -> GrantOut:
    """Grant or revoke a catalogue permission (``UnknownPermission`` otherwise)."""
    require_role(principal, Role.ADMIN)
    actor_id = validate_ident(actor_id, "actor_id")
    permission = validate_name(permission, "permission")
    check_permission(permission, ledger.settings.permissions)
    view = _put(ledger, DirectoryKind.PERMISSION_GRANT, grant_record_id(actor_id, permission), body)
    return GrantOut.from_view(view, actor_id=actor_id, permission=permission)


def get_grant(ledger: Ledger, principal: Principal, actor_id: str, permission: str) -> GrantOut:
    """Read a permission grant."""
    require_role(principal, Role.ADMIN)
    actor_id = validate_ident(actor_id, "actor_id")
    permission = validate_name(permission, "permission")
    record_id = grant_record_id(actor_id, permission)
    view = _get(ledger, DirectoryKind.PERMISSION_GRANT, record_id)
    return GrantOut.from_view(view, actor_id=actor_id, permission=permission)


def put_executor_build(
    ledger: Ledger,
    principal: Principal,
    capability: str,
    build_digest: str,
    body: ExecutorBuildIn,
) -> ExecutorBuildOut:
    """Register or withdraw an exact executor build."""
    require_role(principal, Role.ADMIN)
    capability = validate_name(capability, "capability")
    build_digest = validate_digest(build_digest, "build_digest")
    record_id = executor_build_record_id(capability, build_digest)
    view = _put(ledger, DirectoryKind.EXECUTOR_BUILD, record_id, body)
    return ExecutorBuildOut.from_view(view, capability=capability, build_digest=build_digest)


def get_executor_build(
    ledger: Ledger, principal: Principal, capability: str, build_digest: str
) -> ExecutorBuildOut:
    """Read an executor build."""
    require_role(principal, Role.ADMIN)
    capability = validate_name(capability, "capability")
    build_digest = validate_digest(build_digest, "build_digest")
    record_id = executor_build_record_id(capability, build_digest)
    view = _get(ledger, DirectoryKind.EXECUTOR_BUILD, record_id)
    return ExecutorBuildOut.from_view(view, capability=capability, build_digest=build_digest)


def put_target(ledger: Ledger, principal: Principal, target_id: str, body: TargetIn) -> TargetOut:
    """Set a target's current revision."""
    require_role(principal, Role.ADMIN)
    record_id = target_record_id(validate_ident(target_id, "target_id"))
    return TargetOut.from_view(_put(ledger, DirectoryKind.TARGET, record_id, body))


def get_target(ledger: Ledger, principal: Principal, target_id: str) -> TargetOut:
    """Read a target."""
    require_role(principal, Role.ADMIN)
    record_id = target_record_id(validate_ident(target_id, "target_id"))
    return TargetOut.from_view(_get(ledger, DirectoryKind.TARGET, record_id))
