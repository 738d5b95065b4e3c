"""Schemas of the executors route: the builds a proposal may name."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from domain.directory import DeliveryMode


class ExecutorOut(BaseModel):
    """One executor build this server process hosts."""

    model_config = ConfigDict(extra="forbid")

    capability: Annotated[str, Field(description="The spec's `capability`.")]
    executor_build: Annotated[
        str,
        Field(
            description="The exact build digest (`sha256:<64 hex>`): the spec's `executor_build`."
        ),
    ]
    delivery_mode: Annotated[
        DeliveryMode,
        Field(description="How an uncertain outcome of this build is settled (design.md 2.6)."),
    ]
    available: Annotated[
        bool,
        Field(
            description="True when the directory's executor-build record for exactly this "
            "capability and build digest says `available` with this delivery mode AND this "
            "server process hosts the build (every listed build is one its registry holds; a "
            "build this process does not host is not listed, whatever the directory says). "
            "A draining build is never available. A proposal naming a build that is not "
            "available is refused (422 `executor_build_unavailable`, or "
            "`executor_build_draining`)."
        ),
    ]
    state: Annotated[
        Literal["current", "draining"],
        Field(
            description="`current`: the build new proposals should name (at most one per "
            "capability); `draining`: kept only for the attempts and open presentations "
            "already bound to it (docs/operations.md)."
        ),
    ] = "current"
    content_schema: Annotated[
        dict[str, Any] | None,
        Field(
            description="The JSON Schema (Draft 2020-12) the build declares for the spec's "
            "`content`; the key is absent when the build declares none (then any JSON object "
            "is valid). A proposal whose content fails it is refused with a 422 that names "
            "every failing field by its JSON pointer."
        ),
    ] = None
    schema_digest: Annotated[
        str,
        Field(
            description="The spec's `schema_digest` for this build: `sha256:` over the RFC "
            "8785 bytes of `content_schema` (of `{}` when the build declares none). Checked at "
            "propose. The schema is part of the build: a changed schema is a new "
            "`executor_build`."
        ),
    ]


class ExecutorListOut(BaseModel):
    """Every executor build this process hosts, by capability, the newest first within one."""

    items: list[ExecutorOut]
