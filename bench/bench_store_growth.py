"""Store growth per lifecycle, with and without housekeeping (issue 26, finding 6).

One lifecycle on the embedded store (SQLite): a proposal and a presentation,
each with an Idempotency-Key, an approval, the fake executor's run, the
projections, and one webhook delivery of every fact to one subscription (a
receiver that acknowledges everything, no network). Then the clock moves past
the lookups' expiry (25 h) and the webhook retention (7 days), and:

- **before**: nothing is swept (the code before housekeeping): every lookup
  item and every delivered body stays;
- **after**: housekeeping passes run until there is nothing left to do.

The figures are bytes of row content per lifecycle by table (key and value
lengths, what the store holds apart from SQLite's page overhead), side by side.
Events are never deleted (I9): their bytes are the same in both columns.

Run: ``.venv/bin/python bench/bench_store_growth.py [--lifecycles N | --quick]``
(``bench/bench_memory.py`` is the process memory; this is what the store keeps).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TABLES = {
    "stored_events": "length(originator_id) + length(topic) + length(state)",
    "ledger_lookups": "length(key) + length(value) + coalesce(length(expires_at), 0)",
    "ledger_views": (
        "length(name) + length(key) + length(data) + coalesce(length(list_pk), 0) "
        "+ coalesce(length(list_sk), 0)"
    ),
}
DAY = 86400
FILE = "file (after VACUUM)"


class Accepting:
    """A receiver that acknowledges every send."""

    def post(self, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        return 204


def table_bytes(path: str) -> dict[str, tuple[int, int]]:
    """(rows, bytes of row content) of each table, and the whole file after VACUUM."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        found = {
            table: db.execute(f"SELECT count(*), coalesce(sum({size}), 0) FROM {table}").fetchone()
            for table, size in TABLES.items()
        }
        db.execute("VACUUM")
        ((pages, page_size),) = db.execute(
            "SELECT page_count, page_size FROM pragma_page_count(), pragma_page_size()"
        )
    finally:
        db.close()
    return {**found, FILE: (0, pages * page_size)}


def run(path: str, lifecycles: int, housekeeping: bool) -> dict[str, tuple[int, int]]:
    from adapters.bootstrap import build_ledger
    from adapters.housekeeping import housekeeping_pass
    from adapters.settings import load_settings
    from adapters.system import ManualClock
    from adapters.webhooks.config import WebhookSubscription
    from domain.notifications import NotificationType
    from domain.services.idempotency import IdempotencyKey
    from domain.services.proposals import present, propose
    from projections.webhooks import outstanding
    from tests.support.subscribers import drain

    sys.path.insert(0, str(ROOT / "bench"))
    from harness import Lifecycle

    clock = ManualClock()
    ledger = build_ledger(load_settings(store="sqlite", sqlite_path=path), clock=clock)
    ledger.webhooks = [
        WebhookSubscription(
            id="chat",
            url="https://hooks.example/ledger",
            secret_env="LEDGER_WEBHOOK_SECRET",
            events=frozenset(NotificationType),
            secret="whsec_" + "QUFB" * 11,
        )
    ]
    life = Lifecycle(ledger.store, clock=clock, registry=ledger.registry, effects=ledger.effects)
    worker = life.worker()
    deliverer = ledger.make_deliverer(transport=Accepting(), random=lambda: 0.5)
    who = life.who(0)
    for n in range(lifecycles):
        spec = life.spec()
        proposed = propose(
            life.ctx,
            actor_id=who.actor_id,
            spec_data=spec,
            idempotency=key(IdempotencyKey, f"p-{n}", "/proposals", spec),
            proposer="assistant",
        )
        body = {"version": 1, "n": n}
        token = present(
            life.ctx,
            proposal_id=proposed.proposal_id,
            version=1,
            identity_binding_id=who.identity_binding_id,
            channel_binding_id=who.channel_binding_id,
            conversation_key=who.conversation_key,
            idempotency=key(IdempotencyKey, f"s-{n}", "/presentations", body),
        ).token
        worker.process(life.approve(token))
        if n % 50 == 49:
            drain(ledger)
            assert ledger.views is not None
            while outstanding(ledger.views):
                deliverer.run_once()
    drain(ledger)
    assert ledger.views is not None
    while outstanding(ledger.views):
        deliverer.run_once()
    clock.advance(ledger.settings.webhook_retention_seconds + DAY)
    if housekeeping:
        while housekeeping_pass(ledger).full:
            pass
    ledger.close()
    return table_bytes(path)


def key(cls: Any, value: str, route: str, body: Any) -> Any:
    return cls.of(value, scope="proposer:assistant", method="POST", route=route, body=body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lifecycles", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="20 lifecycles (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.lifecycles = 20
    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        for label, sweep in (("before", False), ("after", True)):
            figures[label] = run(str(Path(folder) / f"{label}.db"), args.lifecycles, sweep)
    n = args.lifecycles
    print(f"store growth per lifecycle, {n} lifecycles, SQLite (bytes of row content)\n")
    print(
        "| table | before: rows | before: bytes/lifecycle | after: rows | "
        "after: bytes/lifecycle | after/before |"
    )
    print("|---|---|---|---|---|---|")
    before, after = figures["before"], figures["after"]
    rows = [(table, *before[table], *after[table]) for table in TABLES]
    rows.append(
        (
            "rows in all",
            sum(r[1] for r in rows),
            sum(r[2] for r in rows),
            sum(r[3] for r in rows),
            sum(r[4] for r in rows),
        )
    )
    rows.append((FILE, "", before[FILE][1], "", after[FILE][1]))
    for table, rows_b, bytes_b, rows_a, bytes_a in rows:
        ratio = f"{bytes_a / bytes_b:.2f}" if bytes_b else "-"
        print(
            f"| {table} | {rows_b} | {bytes_b / n:,.0f} | {rows_a} | {bytes_a / n:,.0f} | {ratio} |"
        )


if __name__ == "__main__":
    main()
