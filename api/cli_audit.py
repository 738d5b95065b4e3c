"""``ledger audit``: one attempt's timeline (``ledger audit ID``, as before) and the
audit digests of design.md 5.11 (``digest``, ``verify``, ``prove``, ``check-proof``).

``audit`` is a command group whose unknown first word is taken as an attempt
id, so ``ledger audit att_... --verify`` keeps working beside the subcommands.

Exit status: 0 fine; 1 tampering found (the message names the stream); 2 bad
input (a file that is not a digest or proof, a digest for another ledger or
signed with another key).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from api.cli_common import fail as _fail
from api.cli_common import one_line_errors as _one_line_errors
from api.cli_common import operator

SHOW = "show"
BAD_INPUT = 2


class AuditGroup(TyperGroup):
    """A group that reads ``ledger audit ID ...`` as ``ledger audit show ID ...``."""

    # ctx is typer's (vendored) click Context; its class is private to typer.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [SHOW, *args]
        return super().parse_args(ctx, args)


audit_app = typer.Typer(
    cls=AuditGroup,
    help="Audit: one attempt's verified timeline (`ledger audit ATTEMPT_ID`), and digests "
    "over the whole ledger that prove later that nothing was removed or rewritten.",
    no_args_is_help=True,
)


@contextmanager
def _digest_errors() -> Iterator[None]:
    """Bad digests and proofs exit 2; everything else as every other command."""
    from domain.errors import DigestInvalid

    with _one_line_errors():
        try:
            yield
        except DigestInvalid as exc:
            _fail(exc.detail, BAD_INPUT)


def _ledger() -> Any:
    from adapters.bootstrap import build_ledger
    from adapters.settings import load_settings

    return build_ledger(load_settings())


@audit_app.command("digest")
def digest_command(
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the digest to this file instead of stdout.")
    ] = None,
) -> None:
    """Print (or --out write) a digest: one Merkle root over every stream head.

    Signed with LEDGER_AUDIT_SIGNING_KEY when set. Keep it where the ledger's
    writers cannot reach.
    """
    with _digest_errors():
        from adapters.audit.digests import digest_text
        from api.service import audit as service

        ledger = _ledger()
        try:
            digest = service.digest(ledger, operator())
        finally:
            ledger.close()
        text = digest_text(digest)
        if out is None:
            typer.echo(text, nl=False)
            return
        out.write_text(text, encoding="utf-8")
        signed = "signed" if digest.signature else "unsigned"
        typer.echo(
            f"{signed} digest of {digest.stream_count} streams, root {digest.root}, "
            f"written to {out}"
        )


@audit_app.command("reindex")
def reindex_command() -> None:
    """Add head-index entries for streams written before the index existed.

    Run once after upgrading a ledger that already holds data, then take a
    digest. An existing entry is never changed. On DynamoDB this scans the
    table (an admin operation).
    """
    with _digest_errors():
        ledger = _ledger()
        try:
            seen, added, skipped = ledger.store.index_missing_heads()
        finally:
            ledger.close()
        typer.echo(
            f"{seen} streams, {added} head entries added, "
            f"{seen - added - len(skipped)} already indexed"
        )
        if skipped:
            _fail(
                f"{len(skipped)} streams not indexed, their newest event does not decode "
                f"(first: {skipped[0]}); run `ledger audit verify` on a digest",
                1,
            )


@audit_app.command("verify")
def verify_command(
    digest_file: Annotated[
        str, typer.Option("--digest", help="The digest to check (today's ledger must extend it).")
    ],
    since: Annotated[
        str | None,
        typer.Option("--since", help="An older digest: check instead that --digest extends it."),
    ] = None,
    public_key: Annotated[
        str | None,
        typer.Option(
            "--public-key",
            help="PEM Ed25519 public key of the signer "
            "(default: the public half of LEDGER_AUDIT_SIGNING_KEY).",
        ),
    ] = None,
) -> None:
    """Check that today's ledger extends a digest (or --since: that one digest extends another).

    Exit 0 when it does; 1 naming the first stream that was truncated, deleted,
    rewritten or reordered (or a digest whose signature does not verify); 2 when
    the digest cannot be checked (not JSON, another key, another ledger). A
    ledger that is only behind the digest (what restoring an older backup
    leaves) also gets one line per stream it lost on stdout.
    """
    with _digest_errors():
        from adapters.audit.digests import check_digest_itself, load_digest
        from adapters.settings import load_settings
        from api.service import audit as service

        settings = load_settings()
        digest = load_digest(digest_file)
        older = load_digest(since) if since else None
        for checked in (digest, older):
            if checked is not None:
                problem = check_digest_itself(settings, checked, public_key, settings.ledger_id)
                if problem is not None:
                    _fail(problem.message, 1)
        ledger = _ledger()
        note = ""
        try:
            verdict = service.verify(ledger, operator(), digest, since=older)
            if older is None and verdict.behind is not None:
                note = service.restore_note(ledger, operator(), digest)
        finally:
            ledger.close()
        if verdict.behind is not None:
            for line in verdict.behind.lines():  # what a restore lost, stream by stream
                typer.echo(line)
            _fail(f"behind the digest: {verdict.message} ({note})", 1)
        if not verdict.ok:
            _fail(f"tampering found: {verdict.message}", 1)
        typer.echo(f"ok: {verdict.message}")


@audit_app.command("prove")
def prove_command(
    stream_id: Annotated[str, typer.Argument(help="The stream (attempt, proposal or record id).")],
    version: Annotated[int, typer.Argument(min=1, help="The event's version in the stream.")],
    digest_file: Annotated[str, typer.Option("--digest", help="The digest to prove against.")],
    public_key: Annotated[
        str | None, typer.Option("--public-key", help="PEM Ed25519 public key of the signer.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the proof to this file.")] = None,
) -> None:
    """Print an inclusion proof of one event, checked later with `check-proof`.

    The proof is the event's chain path to the head the digest recorded and
    that head's Merkle path to the root.
    """
    with _digest_errors():
        from adapters.audit.digests import TamperingFound, check_digest_itself, load_digest
        from adapters.settings import load_settings
        from api.service import audit as service

        settings = load_settings()
        digest = load_digest(digest_file)
        problem = check_digest_itself(settings, digest, public_key, settings.ledger_id)
        if problem is not None:
            _fail(problem.message, 1)
        ledger = _ledger()
        try:
            proof = service.inclusion_proof(ledger, operator(), digest, stream_id, version)
        except TamperingFound as exc:
            _fail(f"tampering found: {exc}", 1)
        finally:
            ledger.close()
        text = json.dumps(proof, indent=1, sort_keys=True) + "\n"
        if out is None:
            typer.echo(text, nl=False)
        else:
            out.write_text(text, encoding="utf-8")
            typer.echo(f"proof of {stream_id} version {version} written to {out}")


@audit_app.command("check-proof")
def check_proof_command(
    proof_file: Annotated[str, typer.Argument(help="The proof file (from `ledger audit prove`).")],
    digest_file: Annotated[str, typer.Option("--digest", help="The digest it claims.")],
    public_key: Annotated[
        str | None, typer.Option("--public-key", help="PEM Ed25519 public key of the signer.")
    ] = None,
) -> None:
    """Check an inclusion proof offline, against the digest only (no ledger access)."""
    with _digest_errors():
        from adapters.audit.digests import check_digest_itself, load_digest, read_json
        from adapters.settings import load_settings
        from domain.proofs import check_proof

        digest = load_digest(digest_file)
        problem = check_digest_itself(load_settings(), digest, public_key, None)
        if problem is not None:
            _fail(problem.message, 1)
        proof = read_json(proof_file, "proof")
        why = check_proof(proof, digest)
        if why is not None:
            _fail(f"the proof does not hold: {why}", 1)
        typer.echo(
            f"ok: {proof['stream']} version {proof['version']} "
            f"(event {proof['event_hash']}) is covered by the digest of "
            f"{digest.created_at}, root {digest.root}"
        )


@audit_app.command(SHOW)
def audit(
    attempt_id: Annotated[str, typer.Argument(help="The execution attempt id (att_...).")],
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Exit 1 naming the first bad version if a hash chain is broken."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    output: Annotated[
        str, typer.Option("--format", help="text, json or mermaid (the attempt's state diagram).")
    ] = "text",
) -> None:
    """The redacted timeline of an attempt with its proposal and directory context.

    `ledger audit ATTEMPT_ID` is the same command.
    """
    with _one_line_errors():
        import json as jsonlib

        from adapters.bootstrap import build_ledger
        from adapters.settings import load_settings
        from api.service import audit as service
        from projections.audit import mermaid_state_diagram

        if output not in ("text", "json", "mermaid"):
            _fail("--format must be text, json or mermaid")
        settings = load_settings()
        ledger = build_ledger(settings)
        try:
            report = service.attempt_report(ledger, operator(), attempt_id)
        finally:
            ledger.close()
        if as_json or output == "json":
            typer.echo(jsonlib.dumps(report, indent=2, sort_keys=True))
        elif output == "mermaid":
            typer.echo(mermaid_state_diagram(report["attempt"]["events"]), nl=False)
        else:
            _print_audit(report)
        if verify and not report["verified"]:
            streams = [report["attempt"], *report["context"]]
            bad = next(s for s in streams if not s["verified"])
            _fail(
                f"verification failed: {bad['stream_id']} version "
                f"{bad['first_bad_version']} ({bad['reason']})"
            )


def _print_audit(report: dict[str, Any]) -> None:
    """The timeline as tables. Every value is plain text, never console markup: a
    redacted value reads ``[redacted]``, which markup would swallow."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    for stream in [report["attempt"], *report["context"]]:
        mark = (
            "verified"
            if stream["verified"]
            else (f"BROKEN at version {stream['first_bad_version']} ({stream['reason']})")
        )
        table = Table(
            "v",
            "type",
            "recorded at",
            "data",
            title=Text(f"{stream['stream_id']}: {mark}"),
            title_justify="left",
        )
        for event in stream["events"]:
            data = ", ".join(f"{k}={v}" for k, v in sorted(event["data"].items()))
            table.add_row(
                Text(str(event["version"])),
                Text(str(event["type"])),
                Text(str(event["recorded_at"])),
                Text(data),
            )
        console.print(table)
    console.print(Text("all chains verified" if report["verified"] else "verification FAILED"))
