"""Directory admin routes: idempotent PUT and GET of each kind of record.

A PUT with unchanged values appends nothing and returns the same revision.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from api.http.deps import AdminCaller, LedgerDep, require_admin
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
from api.service import directory

router = APIRouter(
    prefix="/directory",
    tags=["directory"],
    dependencies=[Depends(require_admin)],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)


@router.put("/actors/{actor_id}")
def put_actor(actor_id: str, body: ActorIn, caller: AdminCaller, ledger: LedgerDep) -> ActorOut:
    """Create, enable or disable an actor."""
    return directory.put_actor(ledger, caller, actor_id, body)


@router.get("/actors/{actor_id}")
def get_actor(actor_id: str, caller: AdminCaller, ledger: LedgerDep) -> ActorOut:
    """Read an actor."""
    return directory.get_actor(ledger, caller, actor_id)


@router.put("/identity-bindings/{binding_id}")
def put_identity_binding(
    binding_id: str, body: IdentityBindingIn, caller: AdminCaller, ledger: LedgerDep
) -> IdentityBindingOut:
    """Create or change an identity binding."""
    return directory.put_identity_binding(ledger, caller, binding_id, body)


@router.get("/identity-bindings/{binding_id}")
def get_identity_binding(
    binding_id: str, caller: AdminCaller, ledger: LedgerDep
) -> IdentityBindingOut:
    """Read an identity binding."""
    return directory.get_identity_binding(ledger, caller, binding_id)


@router.put("/channel-bindings/{binding_id}")
def put_channel_binding(
    binding_id: str, body: ChannelBindingIn, caller: AdminCaller, ledger: LedgerDep
) -> ChannelBindingOut:
    """Create or change a channel binding."""
    return directory.put_channel_binding(ledger, caller, binding_id, body)


@router.get("/channel-bindings/{binding_id}")
def get_channel_binding(
    binding_id: str, caller: AdminCaller, ledger: LedgerDep
) -> ChannelBindingOut:
    """Read a channel binding."""
    return directory.get_channel_binding(ledger, caller, binding_id)


@router.put("/actors/{actor_id}/permissions/{permission}")
def put_grant(
    actor_id: str, permission: str, body: GrantIn, caller: AdminCaller, ledger: LedgerDep
) -> GrantOut:
    """Grant or revoke a catalogue permission (422 unknown_permission otherwise)."""
    return directory.put_grant(ledger, caller, actor_id, permission, body)


@router.get("/actors/{actor_id}/permissions/{permission}")
def get_grant(actor_id: str, permission: str, caller: AdminCaller, ledger: LedgerDep) -> GrantOut:
    """Read a permission grant."""
    return directory.get_grant(ledger, caller, actor_id, permission)


@router.put("/executor-builds/{capability}/{build_digest}")
def put_executor_build(
    capability: str,
    build_digest: str,
    body: ExecutorBuildIn,
    caller: AdminCaller,
    ledger: LedgerDep,
) -> ExecutorBuildOut:
    """Register or withdraw an exact executor build."""
    return directory.put_executor_build(ledger, caller, capability, build_digest, body)


@router.get("/executor-builds/{capability}/{build_digest}")
def get_executor_build(
    capability: str, build_digest: str, caller: AdminCaller, ledger: LedgerDep
) -> ExecutorBuildOut:
    """Read an executor build."""
    return directory.get_executor_build(ledger, caller, capability, build_digest)


@router.put("/targets/{target_id}")
def put_target(target_id: str, body: TargetIn, caller: AdminCaller, ledger: LedgerDep) -> TargetOut:
    """Set a target's current revision."""
    return directory.put_target(ledger, caller, target_id, body)


@router.get("/targets/{target_id}")
def get_target(target_id: str, caller: AdminCaller, ledger: LedgerDep) -> TargetOut:
    """Read a target."""
    return directory.get_target(ledger, caller, target_id)
