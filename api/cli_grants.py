"""``ledger grants``: standing grants ("allow always", docs/policies.md).

``list ACTOR``, ``add ACTOR --capability ... --max-uses N --expires-in 7d``
and ``revoke ID``, on the configured store, as the operator (an admin).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer

grants_app = typer.Typer(
    help='Standing grants ("allow always"): list, add, revoke.', no_args_is_help=True
)


def _ledger() -> Any:
    from adapters.bootstrap import build_ledger
    from adapters.settings import load_settings

    return build_ledger(load_settings())


_CONDITION = re.compile(r"^\s*([^\s<>=!]+)\s*(==|!=|<=|>=|<|>|\s+in\s+)\s*(.*?)\s*$")
_OPS = {"==": "eq", "!=": "ne", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}


def _scalar(text: str) -> str | int | bool:
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def parse_condition(text: str) -> dict[str, Any]:
    """``minutes<=30``, ``list in home,work``, ``urgent==true`` as a grant condition."""
    from domain.errors import InvalidInput

    match = _CONDITION.match(text)
    if match is None:
        raise InvalidInput(
            "--condition: write FIELD OP VALUE with OP one of == != < <= > >= in "
            "(e.g. 'minutes<=30', 'list in home,work')"
        )
    field, op, value = match.groups()
    if op.strip() == "in":
        return {"field": field, "op": "in", "value": [_scalar(v.strip()) for v in value.split(",")]}
    return {"field": field, "op": _OPS[op], "value": _scalar(value)}


def _expiry(expires_at: str | None, expires_in: str | None) -> str:
    from domain.errors import InvalidInput

    if expires_at is not None:
        return expires_at
    match = re.fullmatch(r"(\d+)([mhd])", expires_in or "")
    if match is None:
        raise InvalidInput("--expires-in: a number and m, h or d (e.g. 7d), or --expires-at")
    unit = {"m": "minutes", "h": "hours", "d": "days"}[match.group(2)]
    moment = datetime.now(UTC) + timedelta(**{unit: int(match.group(1))})
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _grant_line(grant: Any) -> str:
    parts = [
        grant.grant_id,
        grant.state,
        grant.capability,
        f"uses={grant.uses}/{grant.max_uses}",
        f"expires_at={grant.expires_at}",
    ]
    for name in ("destination", "effect"):
        if getattr(grant, name):
            parts.append(f"{name}={getattr(grant, name)}")
    for condition in grant.conditions:
        parts.append(f"{condition['field']} {condition['op']} {json.dumps(condition['value'])}")
    return " ".join(parts)


@grants_app.command("list")
def grants_list_command(
    actor_id: Annotated[str, typer.Argument(help="The actor whose grants to list.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """One line per standing grant of ACTOR_ID: id, state, capability, uses, expiry, bounds."""
    from api.cli_common import one_line_errors, operator
    from api.service import grants

    with one_line_errors():
        ledger = _ledger()
        try:
            listed = grants.list_grants(ledger, operator(), actor_id)
        finally:
            ledger.close()
        for grant in listed.items:
            typer.echo(
                json.dumps(grant.model_dump(), sort_keys=True) if as_json else _grant_line(grant)
            )


@grants_app.command("add")
def grants_add_command(
    actor_id: Annotated[str, typer.Argument(help="The actor the grant is for.")],
    capability: Annotated[
        str, typer.Option(help="The capability it approves.", show_default=False)
    ],
    max_uses: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many proposals.")],
    expires_in: Annotated[
        str | None, typer.Option(help="Lifetime: a number and m, h or d (e.g. 7d).")
    ] = None,
    expires_at: Annotated[
        str | None, typer.Option(help="Or the moment it expires (RFC 3339).")
    ] = None,
    destination: Annotated[str | None, typer.Option(help="Only this destination.")] = None,
    effect: Annotated[str | None, typer.Option(help="Only this effect.")] = None,
    condition: Annotated[
        list[str] | None,
        typer.Option(help="A content condition, e.g. 'minutes<=30' (repeatable)."),
    ] = None,
) -> None:
    """Grant ACTOR_ID a standing approval of CAPABILITY within the bounds; prints its id."""
    from api.cli_common import one_line_errors, operator
    from api.http.schemas.policies import StandingGrantIn
    from api.service import grants
    from api.service.validation import parse

    with one_line_errors():
        body = parse(
            StandingGrantIn,
            {
                "actor_id": actor_id,
                "capability": capability,
                "destination": destination,
                "effect": effect,
                "conditions": [parse_condition(c) for c in condition or ()],
                "expires_at": _expiry(expires_at, expires_in),
                "max_uses": max_uses,
            },
        )
        ledger = _ledger()
        try:
            made = grants.grant(ledger, operator(), body)
        finally:
            ledger.close()
        typer.echo(_grant_line(made))


@grants_app.command("revoke")
def grants_revoke_command(
    grant_id: Annotated[str, typer.Argument(help="The grant (sgr_...).")],
) -> None:
    """Revoke a standing grant: it approves nothing from now on."""
    from api.cli_common import fail, one_line_errors, operator
    from api.http.schemas.policies import RevokeGrantIn
    from api.service import grants
    from domain.errors import NotFound

    with one_line_errors():
        ledger = _ledger()
        try:
            done = grants.revoke(ledger, operator(), grant_id, RevokeGrantIn())
        except NotFound:
            fail(f"no standing grant {grant_id[:80]!r}")
        finally:
            ledger.close()
        typer.echo(_grant_line(done))
