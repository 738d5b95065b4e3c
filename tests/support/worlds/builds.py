"""Two builds of one capability, and workers that host some of them.

A second build ("v2") of a fake capability is the same fake executor under
another build digest, sharing the world's effect ledger, so a test counts
every effect by key whichever build made it. A worker's context is the
world's with its own registry: one worker may host v1 only, another v1 and v2,
as during a rolling deploy.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from adapters.executors.fake import FAKE_CAPABILITIES, FakeExecutor, FakeReconciler
from adapters.executors.registry import StaticExecutorRegistry
from domain.directory import DeliveryMode, DirectoryKind, executor_build_record_id
from domain.ports import ExecutionReceipt, ExecutionRequest
from domain.services.approval import approve
from domain.services.execution import Worker, WorkerPolicy
from domain.spec import sha256_tag
from tests.support.worlds.execution import LEASE, MODES, ExecutionWorld


def v2_digest(capability: str) -> str:
    """The build digest of the second build of a fake capability."""
    return sha256_tag(f"fake-executor/{capability}/v2".encode())


class SecondBuild:
    """A fake executor under the v2 digest (same behaviour, same effect ledger)."""

    def __init__(self, inner: FakeExecutor) -> None:
        self.inner = inner
        self.capability = inner.capability
        self.build_digest = v2_digest(inner.capability)
        self.content_schema = inner.content_schema
        self.delivery_mode = inner.delivery_mode

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        return self.inner.execute(request)


def registry_with(
    world: ExecutionWorld, *, v1: bool = True, v2: bool = False, v1_draining: bool = False
) -> Any:
    """A registry hosting the fakes' v1 builds, their v2 builds, or both (``v1_draining``:
    v1 kept beside v2 for what is bound to it, as a rollover's executors file does)."""
    registry = StaticExecutorRegistry()
    for capability, mode in FAKE_CAPABILITIES.items():
        fake = FakeExecutor(capability, world.effects, world.clock)
        reconciler = (
            FakeReconciler(world.effects) if mode is DeliveryMode.CORRELATION_LOOKUP else None
        )
        if v1:
            registry.register(fake, reconciler, draining=v1_draining)
        if v2:
            registry.register(SecondBuild(fake), reconciler)
    return registry


def allow_v2(world: ExecutionWorld, *, available: bool = True) -> None:
    """The directory entries of every fake's v2 build."""
    for capability, mode in FAKE_CAPABILITIES.items():
        world.put(
            DirectoryKind.EXECUTOR_BUILD,
            executor_build_record_id(capability, v2_digest(capability)),
            delivery_mode=mode.value,
            available=available,
        )


def worker_hosting(world: ExecutionWorld, registry: Any, **policy: Any) -> Worker:
    """A worker on the world's store whose registry is ``registry``."""
    ctx = dataclasses.replace(world.ctx, registry=registry)
    return Worker(ctx, WorkerPolicy(lease_seconds=LEASE, **policy))


def approved_v2(world: ExecutionWorld, mode: str, simulate: str = "success") -> str:
    """An attempt bound to the v2 build of ``mode``'s fake (proposed where v2 is hosted)."""
    capability = MODES[mode]
    ctx = dataclasses.replace(world.ctx, registry=registry_with(world, v1=True, v2=True))
    from domain.services.proposals import present, propose
    from tests.support.worlds.approval import base_spec

    proposal = propose(
        ctx,
        actor_id=world.actor,
        spec_data=base_spec(
            capability=capability,
            executor_build=v2_digest(capability),
            content={"title": "Buy milk", "simulate": simulate},
        ),
    )
    token = present(
        ctx,
        proposal_id=proposal.proposal_id,
        version=1,
        identity_binding_id="ib1",
        channel_binding_id="cb1",
        conversation_key="conv-1",
    ).token
    # approved through a process that hosts only v1: approval never needs the build here
    v1_only = dataclasses.replace(world.ctx, registry=registry_with(world, v1=True))
    return approve(v1_only, token=token, provenance=world.who).attempt_id
