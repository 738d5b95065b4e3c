"""The ledger's own MCP tools: ``list_capabilities`` and ``propose_action``
(``get_action_status`` is in ``api.mcp.status``).

Each one checks its arguments, calls the service functions every entry point
calls (``api.service``) as the MCP server's proposer principal, and answers
ids, statuses and hashes: never a token, never the content it was sent.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from adapters.bootstrap import Ledger
from adapters.executors.mcp_client import fetch_offer, run_blocking
from api.http.schemas.proposals import PresentationIn, ProposalIn
from api.mcp.catalog import Capability, catalog, proposer_build
from api.mcp.config import ActorEntry, McpConfig
from api.mcp.presenter import NoPresenter, Presentation, Presenter
from api.service import proposals
from api.service.principal import Principal
from api.service.validation import parse
from domain.errors import ExecutorBuildUnavailable, InvalidInput
from domain.spec import format_utc

MAX_AGENT_KEY_CHARS = 200
KEY_PREFIX = "mcp:"


class TargetIn(BaseModel):
    """The record the effect changes, at the revision the agent saw."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, Field(min_length=1, max_length=256)]
    base_revision: Annotated[str, Field(min_length=1, max_length=256)]


class ProposeActionIn(BaseModel):
    """The arguments of ``propose_action`` (also what its idempotency key fingerprints)."""

    model_config = ConfigDict(extra="forbid")

    capability: Annotated[str, Field(min_length=1, max_length=64)]
    content: dict[str, Any]
    actor: Annotated[str, Field(min_length=1, max_length=128)]
    target: TargetIn | None = None
    idempotency_key: (
        Annotated[str, Field(min_length=1, max_length=MAX_AGENT_KEY_CHARS, pattern=r"^[!-~]+$")]
        | None
    ) = None


@dataclass
class McpContext:
    """What the tools of one ``ledger mcp`` process share."""

    ledger: Ledger
    config: McpConfig
    presenter: Presenter | None = None


def list_capabilities(ctx: McpContext, principal: Principal) -> dict[str, Any]:
    """The capabilities agents may propose, their content schemas, and the actors."""
    offered = catalog(ctx.ledger, principal, ctx.config)
    return {
        "capabilities": [offered[name].public() for name in sorted(offered)],
        "actors": sorted(ctx.config.actors),
    }


def checked_content(capability: Capability, content: Mapping[str, Any]) -> dict[str, Any]:
    """The content when it matches the capability's content schema; InvalidInput
    naming where and which rule otherwise (never the value)."""
    import jsonschema

    validator_class = jsonschema.validators.validator_for(capability.content_schema)
    errors = sorted(
        validator_class(capability.content_schema).iter_errors(dict(content)),
        key=lambda e: list(e.absolute_path),
    )
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(the object)"
        raise InvalidInput(
            f"content: does not match the content schema of {capability.capability} "
            f"at {where} ({first.validator})"
        )
    return dict(content)


def _actor(ctx: McpContext, actor_id: str) -> ActorEntry:
    actor = ctx.config.actors.get(actor_id)
    if actor is None:
        raise InvalidInput("actor: not an actor this server presents to (see list_capabilities)")
    return actor


def _capability(ctx: McpContext, principal: Principal, name: str) -> Capability:
    found = catalog(ctx.ledger, principal, ctx.config).get(name)
    if found is None:
        raise InvalidInput("capability: not one this server offers (see list_capabilities)")
    if not found.build.available:
        raise ExecutorBuildUnavailable()
    if found.executor is not None:
        # The gateway's capability: only while the server still offers exactly that tool.
        executor = found.executor
        try:
            offer = run_blocking(lambda: fetch_offer(executor.gated.server))
        except Exception:
            raise ExecutorBuildUnavailable(
                "The downstream server of this capability cannot be reached."
            ) from None
        if offer.fingerprint(executor.gated.tool.name) != executor.gated.fingerprint:
            raise ExecutorBuildUnavailable(
                "The downstream tool changed since this build was made: nothing is proposed "
                "on it (a restart makes a new build, which an admin must allow)."
            )
    return found


def propose_action(ctx: McpContext, principal: Principal, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Propose one effect to an actor and present it on the actor's channel."""
    args = parse(ProposeActionIn, dict(raw))
    if ctx.presenter is None:
        raise NoPresenter()
    actor = _actor(ctx, args.actor)
    capability = _capability(ctx, principal, args.capability)
    content = checked_content(capability, args.content)
    agent_key = args.idempotency_key or secrets.token_hex(16)
    expires = ctx.ledger.clock.now() + timedelta(seconds=ctx.config.file.expires_in_seconds)
    spec: dict[str, Any] = {
        "capability": capability.capability,
        "executor_build": capability.build.executor_build,
        "plugin_build": proposer_build(),
        "schema_digest": capability.schema_digest,
        "policy_digest": capability.policy_digest,
        "permission": capability.permission,
        "effect": capability.effect,
        "destination": capability.destination,
        "content": content,
        "sources": [],
        "expires_at": format_utc(expires.replace(microsecond=0)),
    }
    if args.target is not None:
        spec["target"] = args.target.model_dump()
    body = parse(ProposalIn, {"actor_id": actor.id, "spec": spec})
    proposal = proposals.propose(
        ctx.ledger,
        principal,
        body,
        idempotency_key=f"{KEY_PREFIX}{agent_key}:propose",
        fingerprint=args.model_copy(update={"idempotency_key": None}),
    )
    view = proposals.get_proposal(ctx.ledger, principal, proposal.proposal_id)
    answer: dict[str, Any] = {
        "proposal_id": proposal.proposal_id,
        "version": proposal.version,
        "actor": actor.id,
        "capability": capability.capability,
        "payload_hash": proposal.payload_hash,
        "view_hash": proposal.view_hash,
    }
    if view.status != "presented":  # a repeat after the actor decided: the stored truth
        return {**answer, "status": view.status}
    shown = proposals.present(
        ctx.ledger,
        principal,
        proposal.proposal_id,
        parse(
            PresentationIn,
            {
                "version": proposal.version,
                "identity_binding_id": actor.identity_binding_id,
                "channel_binding_id": actor.channel_binding_id,
                "conversation_key": actor.conversation_key,
                "ttl_seconds": actor.ttl_seconds,
            },
        ),
        idempotency_key=f"{KEY_PREFIX}{agent_key}:present",
    )
    ctx.presenter(
        Presentation(
            proposal_id=proposal.proposal_id,
            version=proposal.version,
            presentation_id=shown.presentation_id,
            token=shown.token,
            expires_at=shown.expires_at,
            provenance=actor.provenance,
            capability=capability.capability,
            payload_hash=proposal.payload_hash,
            view_hash=proposal.view_hash,
            preview=proposal.preview,
        )
    )
    return {
        **answer,
        "status": "awaiting_approval",
        "presentation_id": shown.presentation_id,
        "presentation_expires_at": shown.expires_at,
    }
