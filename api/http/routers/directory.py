"""Directory admin routes: idempotent PUT and GET of each kind of record.

A PUT with unchanged values appends nothing and returns the same revision.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from api.http.deps import LedgerDep, SettingsDep, require_admin
from api.http.errors import error_responses
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
from domain.services.directory import check_permission, get_record, put_record

router = APIRouter(
    prefix="/directory",
    tags=["directory"],
    dependencies=[Depends(require_admin)],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)


@router.put("/actors/{actor_id}")
def put_actor(actor_id: str, body: ActorIn, ledger: LedgerDep) -> ActorOut:
    """Create, enable or disable an actor."""
    record_id = actor_record_id(validate_ident(actor_id, "actor_id"))
    view = put_record(
        ledger.store,
        ledger.clock,
        cache=ledger.read_cache,
        kind=DirectoryKind.ACTOR,
        record_id=record_id,
        values=body.model_dump(),
    )
    return ActorOut.from_view(view)


@router.get("/actors/{actor_id}")
def get_actor(actor_id: str, ledger: LedgerDep) -> ActorOut:
    """Read an actor."""
    record_id = actor_record_id(validate_ident(actor_id, "actor_id"))
    return ActorOut.from_view(get_record(ledger.store, DirectoryKind.ACTOR, record_id))


@router.put("/identity-bindings/{binding_id}")
def put_identity_binding(
    binding_id: str, body: IdentityBindingIn, ledger: LedgerDep
) -> IdentityBindingOut:
    """Create or change an identity binding."""
    record_id = identity_binding_record_id(validate_ident(binding_id, "binding_id"))
    view = put_record(
        ledger.store,
        ledger.clock,
        cache=ledger.read_cache,
        kind=DirectoryKind.IDENTITY_BINDING,
        record_id=record_id,
        values=body.model_dump(),
    )
    return IdentityBindingOut.from_view(view)


@router.get("/identity-bindings/{binding_id}")
def get_identity_binding(binding_id: str, ledger: LedgerDep) -> IdentityBindingOut:
    """Read an identity binding."""
    record_id = identity_binding_record_id(validate_ident(binding_id, "binding_id"))
    view = get_record(ledger.store, DirectoryKind.IDENTITY_BINDING, record_id)
    return IdentityBindingOut.from_view(view)


@router.put("/channel-bindings/{binding_id}")
def put_channel_binding(
    binding_id: str, body: ChannelBindingIn, ledger: LedgerDep
) -> ChannelBindingOut:
    """Create or change a channel binding."""
    record_id = channel_binding_record_id(validate_ident(binding_id, "binding_id"))
    view = put_record(
        ledger.store,
        ledger.clock,
        cache=ledger.read_cache,
        kind=DirectoryKind.CHANNEL_BINDING,
        record_id=record_id,
        values=body.model_dump(),
    )
    return ChannelBindingOut.from_view(view)


@router.get("/channel-bindings/{binding_id}")
def get_channel_binding(binding_id: str, ledger: LedgerDep) -> ChannelBindingOut:
    """Read a channel binding."""
    record_id = channel_binding_record_id(validate_ident(binding_id, "binding_id"))
    view = get_record(ledger.store, DirectoryKind.CHANNEL_BINDING, record_id)
    return ChannelBindingOut.from_view(view)


@router.put("/actors/{actor_id}/permissions/{permission}")
def put_grant(
    actor_id: str, permission: str, body: GrantIn, ledger: LedgerDep, settings: SettingsDep
) -> GrantOut:
    """Grant or revoke a catalogue permission (422 unknown_permission otherwise)."""
    actor_id = validate_ident(actor_id, "actor_id")
    permission = validate_name(permission, "permission")
    check_permission(permission, settings.permissions)
    view = put_record(
        ledger.store,
        ledger.clock,
        cache=ledger.read_cache,
        kind=DirectoryKind.PERMISSION_GRANT,
        record_id=grant_record_id(actor_id, permission),
        values=body.model_dump(),
    )
    return GrantOut.from_view(view, actor_id=actor_id, permission=permission)


@router.get("/actors/{actor_id}/permissions/{permission}")
def get_grant(actor_id: str, permission: str, ledger: LedgerDep) -> GrantOut:
    """Read a permission grant."""
    actor_id = validate_ident(actor_id, "actor_id")
    permission = validate_name(permission, "permission")
    view = get_record(
        ledger.store, DirectoryKind.PERMISSION_GRANT, grant_record_id(actor_id, permission)
    )
    return GrantOut.from_view(view, actor_id=actor_id, permission=permission)


@router.put("/executor-builds/{capability}/{build_digest}")
def put_executor_build(
    capability: str, build_digest: str, body: ExecutorBuildIn, ledger: LedgerDep
) -> ExecutorBuildOut:
    """Register or withdraw an exact executor build."""
    capability = validate_name(capability, "capability")
    build_digest = validate_digest(build_digest, "build_digest")
    view = put_record(
        ledger.store,
        ledger.clock,
        cache=ledger.read_cache,
        kind=DirectoryKind.EXECUTOR_BUILD,
        record_id=executor_build_record_id(capability, build_digest),
        values=body.model_dump(),
    )
    return ExecutorBuildOut.from_view(view, capability=capability, build_digest=build_digest)


@router.get("/executor-builds/{capability}/{build_digest}")
def get_executor_build(capability: str, build_digest: str, ledger: LedgerDep) -> ExecutorBuildOut:
    """Read an executor build."""
    capability = validate_name(capability, "capability")
    build_digest = validate_digest(build_digest, "build_digest")
    view = get_record(
        ledger.store,
        DirectoryKind.EXECUTOR_BUILD,
        executor_build_record_id(capability, build_digest),
    )
    return ExecutorBuildOut.from_view(view, capability=capability, build_digest=build_digest)


@router.put("/targets/{target_id}")
def put_target(target_id: str, body: TargetIn, ledger: LedgerDep) -> TargetOut:
    """Set a target's current revision."""
    record_id = target_record_id(validate_ident(target_id, "target_id"))
    view = put_record(
        ledger.store,
        ledger.clock,
        cache=ledger.read_cache,
        kind=DirectoryKind.TARGET,
        record_id=record_id,
        values=body.model_dump(),
    )
    return TargetOut.from_view(view)


@router.get("/targets/{target_id}")
def get_target(target_id: str, ledger: LedgerDep) -> TargetOut:
    """Read a target."""
    record_id = target_record_id(validate_ident(target_id, "target_id"))
    return TargetOut.from_view(get_record(ledger.store, DirectoryKind.TARGET, record_id))
