"""``ledger policies`` (docs/policies.md).

``validate FILE`` and ``test FILE --cases CASES`` need no store; ``diff FILE``,
``apply FILE`` and ``show`` read (and apply writes) the configured store, as
the operator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

policies_app = typer.Typer(
    help="The Cedar policy set: validate, test, diff, apply, show.", no_args_is_help=True
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
            if policy.quorum is not None:
                mark = f" @quorum {policy.quorum.required} of {policy.quorum.group}"
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
    from domain.policy_diff import diff, policy_text
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
    from api.cli_common import one_line_errors, operator
    from api.http.schemas.policies import PolicySetIn
    from api.service.policies import put_policies
    from api.service.validation import parse

    with one_line_errors():
        body = parse(PolicySetIn, {"text": _read(file), "expected_version": expected_version})
        ledger = _ledger()
        try:
            applied = put_policies(ledger, operator(), body)
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
    from api.cli_common import one_line_errors, operator
    from api.service.policies import get_policies

    with one_line_errors():
        ledger = _ledger()
        try:
            current = get_policies(ledger, operator())
        finally:
            ledger.close()
        if as_json:
            typer.echo(json.dumps(current.model_dump(), sort_keys=True))
        elif current.version == 0:
            typer.echo("no policy set")
        else:
            typer.echo(f"# version {current.version}, digest {current.digest or 'none'}")
            typer.echo(current.text or "", nl=False)
