"""What a propose checks besides the spec's own shape (design.md 5.1): the
spec against its build's content schema, and the actor against the directory.

Both answer the proposer with a 422 naming the failing field, so a proposal
that could never be approved is refused when it is made, whatever entry
point it came through (HTTP, CLI, the in-process API).
"""

from __future__ import annotations

from domain.directory import actor_record_id, grant_record_id
from domain.errors import ActorDisabled, PermissionNotGranted, UnknownActor
from domain.ports import ExecutorRegistry
from domain.problems import FieldProblem
from domain.services.context import ServiceContext
from domain.services.read_cache import read_directory
from domain.spec import NO_CONTENT_SCHEMA, ProposalSpec, content_schema_digest

SPEC_POINTER = "/spec"
"""Where the spec sits in a propose request (``{"actor_id", "spec", ...}``): the
prefix of every field problem of the spec."""


def content_problems(registry: ExecutorRegistry, spec: ProposalSpec) -> list[FieldProblem]:
    """The spec against its build's content schema: ``schema_digest`` must be
    that schema's digest, and ``content`` must be valid under it (design.md 2.1)."""
    schema = registry.content_schema(spec.capability, spec.executor_build)
    expected = schema.digest if schema is not None else content_schema_digest(NO_CONTENT_SCHEMA)
    problems: list[FieldProblem] = []
    if spec.schema_digest != expected:
        problems.append(
            FieldProblem(
                f"{SPEC_POINTER}/schema_digest",
                "is not the digest of this build's content schema (its schema_digest in "
                "GET /executors)",
            )
        )
    if schema is not None:
        problems.extend(schema.problems(spec.content, f"{SPEC_POINTER}/content"))
    return problems


def check_actor_may_propose(ctx: ServiceContext, actor_id: str, permission: str) -> None:
    """The actor is an enabled actor of the directory and holds the permission.

    Approval checks both again (with everything else of I7, and refuses with its
    uniform 404); checking them here tells the proposer at once, in a 422 of its
    own, instead of leaving a proposal nobody can ever approve. The records may
    come from the read cache: a stale one that refuses is read again fresh, and a
    stale one that accepts lets through only what approval refuses later."""
    try:
        _check_actor(ctx, actor_id, permission, fresh=False)
    except (UnknownActor, ActorDisabled, PermissionNotGranted):
        if not ctx.cache.enabled:
            raise
        _check_actor(ctx, actor_id, permission, fresh=True)


def _check_actor(ctx: ServiceContext, actor_id: str, permission: str, *, fresh: bool) -> None:
    actor, _ = read_directory(ctx.store, ctx.cache, actor_record_id(actor_id), fresh=fresh)
    if actor is None:
        raise UnknownActor(problems=[FieldProblem("/actor_id", "is not an actor in the directory")])
    if not actor.flag("enabled"):
        raise ActorDisabled(problems=[FieldProblem("/actor_id", "is disabled in the directory")])
    grant, _ = read_directory(
        ctx.store, ctx.cache, grant_record_id(actor_id, permission), fresh=fresh
    )
    if grant is None or not grant.flag("granted"):
        raise PermissionNotGranted(
            problems=[
                FieldProblem(
                    f"{SPEC_POINTER}/permission", "is not granted to this actor in the directory"
                )
            ]
        )
