"""``ledger token``: a development bearer token, signed with the configured secret."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli_common import fail as _fail
from api.cli_common import one_line_errors as _one_line_errors
from api.service.roles import DEFAULT_TTL_SECONDS, Role

MAX_TOKEN_TTL_SECONDS = 30 * 86400


def token_command(
    sub: Annotated[str, typer.Option("--sub", help="The subject (`sub` claim).")],
    role: Annotated[Role, typer.Option("--role", help="The `role` claim.")],
    actor_id: Annotated[str | None, typer.Option(help="Channel tokens: actor id.")] = None,
    identity_binding_id: Annotated[
        str | None, typer.Option(help="Channel tokens: identity binding id.")
    ] = None,
    channel_binding_id: Annotated[
        str | None, typer.Option(help="Channel tokens: channel binding id.")
    ] = None,
    conversation_key: Annotated[
        str | None, typer.Option(help="Channel tokens: conversation key.")
    ] = None,
    channel: Annotated[
        str | None,
        typer.Option(
            help="A channel service's token: the channel it is registered for "
            "(it asserts each decision's provenance, for that channel's bindings only)."
        ),
    ] = None,
    ttl: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_TOKEN_TTL_SECONDS,
            help="Lifetime in seconds (at most LEDGER_AUTH_MAX_TOKEN_LIFETIME_SECONDS).",
        ),
    ] = DEFAULT_TTL_SECONDS,
) -> None:
    """Print a development JWT (HS256, the configured secret) and nothing else on stdout.

    A channel token needs all four provenance options, or --channel (a channel
    service's token). Refused when LEDGER_ENV=production.
    """
    with _one_line_errors():
        from adapters.settings import Environment, load_settings
        from api.http.auth import mint_token
        from domain.services.approval import Provenance

        settings = load_settings()
        if settings.env is Environment.PRODUCTION:
            _fail("ledger token mints development tokens; refused when LEDGER_ENV=production")
        flags = {
            "actor_id": actor_id,
            "identity_binding_id": identity_binding_id,
            "channel_binding_id": channel_binding_id,
            "conversation_key": conversation_key,
        }
        provenance = None
        if role is Role.CHANNEL:
            missing = ["--" + name.replace("_", "-") for name, v in flags.items() if v is None]
            if missing and (channel is None or len(missing) < len(flags)):
                _fail(f"--role channel needs {', '.join(missing)} (or --channel alone)")
            if not missing:
                provenance = Provenance(**{name: str(v) for name, v in flags.items()})
        elif channel is not None or any(v is not None for v in flags.values()):
            _fail(
                "--actor-id, --identity-binding-id, --channel-binding-id, "
                "--conversation-key and --channel are only for --role channel"
            )
        typer.echo(
            mint_token(
                settings,
                subject=sub,
                role=role,
                provenance=provenance,
                channel=channel,
                ttl_seconds=ttl,
            )
        )


def register(app: typer.Typer) -> None:
    """Add ``token`` to the ``ledger`` command."""
    app.command("token")(token_command)
