"""The configuration of ``ledger mcp`` (``--config FILE``, TOML; docs/mcp.md).

    proposer = "assistant-agent"        # the proposer a stdio client acts as
    default_actor = "alice"             # whom a gated tool's call asks (the only actor if one)
    expires_in_seconds = 86400          # how long a proposal stays approvable

    [presenter]                         # where presentation tokens go: the actors' channel
    url = "http://127.0.0.1:9000/presentations"
    secret = "env:PRESENTER_SECRET"     # signs each delivery (Standard Webhooks)

    [[actor]]                           # who agents may propose to, and where they approve
    id = "alice"
    identity_binding_id = "ib-alice"
    channel_binding_id = "cb-kitchen"
    conversation_key = "conv-42"

    [[capability]]                      # a capability agents may propose (gated tools of
    capability = "tasks.create"         # [[mcp]] servers are listed without one)
    permission = "tasks.write"
    effect = "create"
    destination = "tasks"

Every problem is one line naming the file and the key; secrets come only from
``env:NAME`` references.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adapters.executors.http_config import ENV_REFERENCE, entry_error, parse_template
from adapters.executors.http_config import HttpConfigError as _UrlError
from adapters.settings import SettingsError
from domain.services.approval import Provenance
from domain.spec import NAME_PATTERN

MAX_FILE_BYTES = 256 * 1024
DEFAULT_PROPOSER = "mcp-agent"
Ident = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@\-]+$")]


class McpServerConfigError(SettingsError):
    """``ledger mcp`` cannot start with this configuration; the message names the key."""


class PresenterEntry(BaseModel):
    """``[presenter]``: the webhook that receives each presentation (and its token)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    url: Annotated[str, Field(min_length=1, max_length=2048)]
    secret: Annotated[str, Field(pattern=ENV_REFERENCE.pattern)]
    timeout_seconds: Annotated[float, Field(gt=0, le=60, strict=False)] = 5.0


class ActorEntry(BaseModel):
    """``[[actor]]``: an actor agents may propose to, and the channel it approves in."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: Ident
    identity_binding_id: Ident
    channel_binding_id: Ident
    conversation_key: Annotated[str, Field(min_length=1, max_length=256)]
    ttl_seconds: Annotated[int, Field(ge=60, le=86400)] | None = None

    @property
    def provenance(self) -> Provenance:
        return Provenance(
            self.id, self.identity_binding_id, self.channel_binding_id, self.conversation_key
        )


class CapabilityEntry(BaseModel):
    """``[[capability]]``: what a proposal of this capability means."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    capability: Annotated[str, Field(pattern=NAME_PATTERN)]
    permission: Annotated[str, Field(pattern=NAME_PATTERN)]
    effect: Annotated[str, Field(pattern=NAME_PATTERN)]
    destination: Annotated[str, Field(min_length=1, max_length=256)]
    description: Annotated[str, Field(max_length=1024)] = ""


class McpFile(BaseModel):
    """The whole file, exactly as written (unknown keys are refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    proposer: Ident = DEFAULT_PROPOSER
    default_actor: Ident | None = None
    expires_in_seconds: Annotated[int, Field(ge=60, le=30 * 86400)] = 86400
    presenter: PresenterEntry | None = None
    actor: Annotated[list[ActorEntry], Field(max_length=1000)] = Field(default_factory=list)
    capability: Annotated[list[CapabilityEntry], Field(max_length=256)] = Field(
        default_factory=list
    )


@dataclass(frozen=True)
class McpConfig:
    """A checked configuration; the presenter's secret resolved (kept out of repr)."""

    file: McpFile
    presenter_secret: str | None = None

    def __repr__(self) -> str:
        return f"McpConfig(proposer={self.file.proposer!r})"

    @property
    def actors(self) -> dict[str, ActorEntry]:
        return {actor.id: actor for actor in self.file.actor}

    @property
    def default_actor(self) -> str | None:
        """Who a gated tool's call is proposed to when its ``_meta`` names no actor:
        ``default_actor``, or the only actor listed."""
        if self.file.default_actor is not None:
            return self.file.default_actor
        return self.file.actor[0].id if len(self.file.actor) == 1 else None

    @property
    def capabilities(self) -> dict[str, CapabilityEntry]:
        return {entry.capability: entry for entry in self.file.capability}


def parse_config(
    document: Mapping[str, Any], name: str, environ: Mapping[str, str], *, production: bool = False
) -> McpConfig:
    """Check a parsed document; ``McpServerConfigError`` names ``name`` and the key."""
    try:
        file = McpFile.model_validate(document)
    except ValidationError as exc:
        raise McpServerConfigError(f"{name}: {entry_error(exc)}") from None
    if file.default_actor is not None and file.default_actor not in {a.id for a in file.actor}:
        raise McpServerConfigError(f"{name}: default_actor: not one of the [[actor]] ids")
    for kind, ids in (
        ("actor", [a.id for a in file.actor]),
        ("capability", [c.capability for c in file.capability]),
    ):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise McpServerConfigError(f"{name}: {kind} {twice[0]!r} is listed twice")
    secret = None
    if file.presenter is not None:
        try:
            parse_template(file.presenter.url, frozenset(), "presenter.url", production=production)
        except _UrlError as exc:
            raise McpServerConfigError(f"{name}: {exc}") from None
        reference = ENV_REFERENCE.match(file.presenter.secret)
        assert reference is not None
        secret = environ.get(reference.group(1), "")
        if len(secret) < 16:
            raise McpServerConfigError(
                f"{name}: presenter.secret: environment variable {reference.group(1)} must "
                "hold at least 16 characters"
            )
    return McpConfig(file, secret)


def load_config(path: str | Path | None, environ: Mapping[str, str]) -> McpConfig:
    """The file at ``path`` (None: the defaults, no actors and no presenter)."""
    if path is None:
        return McpConfig(McpFile())
    file = Path(path)
    name = f"--config {file.name}"
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise McpServerConfigError(f"{name}: cannot read ({exc.strerror or 'error'})") from None
    if len(data) > MAX_FILE_BYTES:
        raise McpServerConfigError(f"{name}: larger than {MAX_FILE_BYTES} bytes")
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise McpServerConfigError(f"{name}: not UTF-8 text") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise McpServerConfigError(f"{name}: not valid TOML ({type(exc).__name__})") from None
    return parse_config(document, name, environ)
