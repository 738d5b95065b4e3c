"""``ledger webhooks``: the delivery records of the signed webhooks (design.md 5.10).

``list [--status failing]`` prints one line per delivery (failing and pending
ones by subscription, soonest next try first; delivered ones oldest first);
``redeliver ID`` makes one pending again, due now: the running server's
deliverer sends it on its next pass.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from projections.delivery_status import DeliveryStatus

webhooks_app = typer.Typer(
    help="Webhook deliveries: list them by status, send one again.",
    no_args_is_help=True,
)


def _ledger() -> Any:
    from adapters.bootstrap import build_ledger
    from adapters.settings import load_settings

    return build_ledger(load_settings())


def _line(row: dict[str, Any]) -> str:
    parts = [
        row["delivery_id"],
        row["status"],
        row["type"],
        row["subject_id"],
        f"subscription={row['subscription_id']}",
        f"attempts={row['attempts']}",
    ]
    if row["status"] != DeliveryStatus.DELIVERED.value:
        parts.append(f"next_try_at={row['next_try_at']}")
    if row.get("last_error"):
        parts.append(f"last_error={row['last_error']}")
    if row.get("response_status") is not None:
        parts.append(f"response_status={row['response_status']}")
    return " ".join(parts)


@webhooks_app.command("list")
def list_command(
    status: Annotated[
        DeliveryStatus,
        typer.Option("--status", help="Which deliveries: pending, failing or delivered."),
    ] = (DeliveryStatus.FAILING),
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """List deliveries in one status (default: failing), soonest next try first.

    One line each: id, status, type, attempt or proposal id, subscription, tries,
    and for unacknowledged ones the next try, the error class and the receiver's
    status code.
    """
    from api.cli_common import one_line_errors as _one_line_errors
    from api.cli_common import operator
    from api.service import webhooks as service
    from api.service.cursors import MAX_PAGE

    with _one_line_errors():
        ledger = _ledger()
        try:
            cursor: str | None = None
            shown = 0
            while shown < limit:
                page = service.list_deliveries(
                    ledger, operator(), status, limit=min(MAX_PAGE, limit - shown), cursor=cursor
                )
                for item in page.items:
                    data = item.model_dump()
                    typer.echo(json.dumps(data, sort_keys=True) if as_json else _line(data))
                shown += len(page.items)
                cursor = page.next_cursor
                if cursor is None:
                    break
            if shown == 0:
                _say_none(status, configured=bool(ledger.webhooks))
        finally:
            ledger.close()


def _say_none(status: DeliveryStatus, *, configured: bool) -> None:
    """An empty list says so, on stderr (stdout stays one line per delivery)."""
    from rich.console import Console
    from rich.text import Text

    note = f"no {status.value} webhook deliveries"
    if not configured:
        note += "; no [[webhook]] subscription is configured (see LEDGER_EXECUTORS_FILE)"
    # Text, not markup: "[[webhook]]" would be read as a style
    Console(stderr=True, soft_wrap=True, highlight=False).print(Text(note))


@webhooks_app.command("redeliver")
def redeliver_command(
    delivery_id: Annotated[str, typer.Argument(help="The delivery id (whd_...).")],
) -> None:
    """Send one delivery again.

    A failing one goes at the next pass instead of after its backoff; a delivered
    one is sent once more (receivers drop repeats by webhook-id). One delivered
    longer ago than LEDGER_WEBHOOK_RETENTION_SECONDS has been trimmed (no body is
    kept) and cannot be sent again: the command says so and exits 1.
    """
    from adapters.webhooks.deliverer import DeliveryTrimmed
    from api.cli_common import fail as _fail
    from api.cli_common import one_line_errors as _one_line_errors
    from api.cli_common import operator
    from api.service import webhooks as service
    from domain.errors import NotFound

    with _one_line_errors():
        ledger = _ledger()
        try:
            service.redeliver(ledger, operator(), delivery_id)
        except NotFound:
            _fail(f"no webhook delivery {delivery_id[:80]!r}")
        except DeliveryTrimmed as trimmed:
            _fail(f"webhook delivery {delivery_id[:80]!r} was {trimmed.detail}")
        finally:
            ledger.close()
        typer.echo(f"{delivery_id} pending: the running server sends it on its next pass")
