"""``ledger policies`` and ``ledger grants`` (docs/policies.md).

``policies validate FILE`` and ``policies test FILE --cases CASES`` need no
store; ``policies diff FILE``, ``apply FILE`` and ``show`` read (and apply
writes) the configured store, as the operator. ``grants list ACTOR``,
``grants add ACTOR ...`` and ``grants revoke ID`` manage standing grants.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

policies_app = typer.Typer(
    help="The Cedar policy set: validate, test, diff, apply, show.", no_args_is_help=True
)
grants_app = typer.Typer(
    help='Standing grants ("allow always"): list, add, revoke.', no_args_is_help=True
)

FileArg = Annotated[Path, typer.Argument(help="A Cedar policy file.", show_default=False)]


def _ledger() -> Any:
    from adapters.bootstrap import build_ledger
    from adapters.settings import load_settings

    return build_ledger(load_settings())


def _read(path: Path) -> str:
    from api.cli_common import fail

    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {path}: {type(exc).__name__}")


def _compiled(path: Path) -> Any:
    from domain.policy import compile_policies

    return compile_policies(_read(path))


def _summary(policies: Any) -> str:
    auto = [p.id for p in policies.policies if p.auto_approve]
    forbids = [p.id for p in policies.policies if p.effect.value == "forbid"]
    return (
        f"{len(policies.policies)} policies ({len(auto)} auto-approving, "
        f"{len(forbids)} forbidding), digest {policies.digest}"
    )


@policies_app.command("validate")
def validate_command(file: FileArg) -> None:
    """Check FILE is a policy set the ledger accepts (valid Cedar, a unique @id on
    every policy, @auto_approve on permits only); print its policies and digest."""
    from api.cli_common import one_line_errors

    with one_line_errors():
        policies = _compiled(file)
        typer.echo(f"ok: {_summary(policies)}")
        for policy in policies.policies:
            mark = " @auto_approve" if policy.auto_approve else ""
            typer.echo(f"  {policy.effect.value} {policy.id}{mark}")


@policies_app.command("test")
def test_command(
    file: FileArg,
    cases: Annotated[
        Path,
        typer.Option(
            "--cases", help="Cases: a TOML file of [[case]] tables, or JSON.", show_default=False
        ),
    ],
) -> None:
    """Evaluate every case of CASES against FILE; one line per case, exit 1 if any
    case gets another verdict than it expects."""
    from api.cli_common import fail, one_line_errors
    from domain.policy_cases import parse_cases, run_cases

    with one_line_errors():
        policies = _compiled(file)
        parsed = parse_cases(_read(cases), toml=cases.suffix.lower() == ".toml")
        results = run_cases(policies, parsed)
        for result in results:
            typer.echo(result.line())
        failed = sum(not r.passed for r in results)
        if failed:
            fail(f"{failed} of {len(results)} cases failed")
        typer.echo(f"{len(results)} passed, 0 failed")


@policies_app.command("diff")
def diff_command(file: FileArg) -> None:
    """What applying FILE would change in the configured policy set, policy by policy
    (+ added, - removed, ~ changed), and the digest before and after."""
    from api.cli_common import one_line_errors
    from domain.policy import diff, policy_text
    from domain.services.policies import current_policies

    with one_line_errors():
        proposed = _compiled(file)
        ledger = _ledger()
        try:
            current = current_policies(ledger.store)
        finally:
            ledger.close()
        changes = diff(current, proposed)
        marks = {"added": "+", "removed": "-", "changed": "~"}
        for change in changes:
            typer.echo(f"{marks[change.change]} {change.policy_id}")
            if change.change != "removed":
                for line in policy_text(proposed.forms[change.policy_id]).splitlines():
                    typer.echo(f"    {line}")
        before = current.digest if current is not None else "none"
        after = proposed.digest if not proposed.empty else "none"
        if not changes:
            typer.echo(f"no change: digest {before}")
        else:
            typer.echo(f"digest {before} -> {after}")


@policies_app.command("apply")
def apply_command(
    file: FileArg,
    expected_version: Annotated[
        int | None,
        typer.Option(
            "--expected-version",
            min=0,
            help="Apply only if the set is still at this version (0: none yet).",
        ),
    ] = None,
) -> None:
    """Make FILE the policy set (one audited event); the same text changes nothing.
    Proposers then send the printed digest as every spec's policy_digest."""
    from api.cli_common import OPERATOR, one_line_errors
    from api.http.schemas.policies import PolicySetIn
    from api.service.policies import put_policies
    from api.service.validation import parse

    with one_line_errors():
        body = parse(PolicySetIn, {"text": _read(file), "expected_version": expected_version})
        ledger = _ledger()
        try:
            applied = put_policies(ledger, OPERATOR, body)
        finally:
            ledger.close()
        verb = "applied" if applied.changed else "unchanged"
        typer.echo(
            f"{verb}: version {applied.version}, {len(applied.policies)} policies, "
            f"digest {applied.digest or 'none'}"
        )


@policies_app.command("show")
def show_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the set as JSON.")] = False,
) -> None:
    """Print the configured policy set's Cedar text (or, with --json, everything)."""
    from api.cli_common import OPERATOR, one_line_errors
    from api.service.policies import get_policies

    with one_line_errors():
        ledger = _ledger()
        try:
            current = get_policies(ledger, OPERATOR)
        finally:
            ledger.close()
        if as_json:
            typer.echo(json.dumps(current.model_dump(), sort_keys=True))
        elif current.version == 0:
            typer.echo("no policy set")
        else:
            typer.echo(f"# version {current.version}, digest {current.digest or 'none'}")
            typer.echo(current.text or "", nl=False)


# -- standing grants ------------------------------------------------------------

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
    from api.cli_common import OPERATOR, one_line_errors
    from api.service import grants

    with one_line_errors():
        ledger = _ledger()
        try:
            listed = grants.list_grants(ledger, OPERATOR, actor_id)
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
    from api.cli_common import OPERATOR, one_line_errors
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
            made = grants.grant(ledger, OPERATOR, body)
        finally:
            ledger.close()
        typer.echo(_grant_line(made))


@grants_app.command("revoke")
def grants_revoke_command(
    grant_id: Annotated[str, typer.Argument(help="The grant (sgr_...).")],
) -> None:
    """Revoke a standing grant: it approves nothing from now on."""
    from api.cli_common import OPERATOR, fail, one_line_errors
    from api.http.schemas.policies import RevokeGrantIn
    from api.service import grants
    from domain.errors import NotFound

    with one_line_errors():
        ledger = _ledger()
        try:
            done = grants.revoke(ledger, OPERATOR, grant_id, RevokeGrantIn())
        except NotFound:
            fail(f"no standing grant {grant_id[:80]!r}")
        finally:
            ledger.close()
        typer.echo(_grant_line(done))
