"""The status rebuilds that ``adapters.rebuild.rebuild`` replaced, kept here only
so bench/bench_rebuild.py measures against them in the same run:

- :func:`rebuild_per_row`: per attempt one read of its stream, one read of its
  row and one write (its ``force`` replaces a row whatever its version, so it
  is not for use beside a live projector);
- :func:`rebuild_through_aggregate`: the first batched rebuild, every stored
  event decoded into its event and applied to an ``ExecutionAttempt``, the live
  rows decoded and compared re-encoded;
- :func:`standard_json`: the stored events decoded by the standard ``json``
  decoder alone, as before ``adapters.json_decode`` (orjson where it answers
  the same).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from adapters import json_decode
from adapters.bootstrap import Ledger
from adapters.rebuild import RebuildReport, attempt_ids, canonical, fold_attempt
from domain.attempt import ExecutionAttempt
from projections.status import STATUS_VIEW, status_record


def rebuild_per_row(ledger: Ledger) -> RebuildReport:
    """The status rebuild before batching: one read, one row read and one write per attempt."""
    assert ledger.views is not None
    report = RebuildReport("status")
    for attempt_id in attempt_ids(ledger):
        attempt = ledger.store.get(ExecutionAttempt, attempt_id)
        if attempt is None:
            continue
        report.total += 1
        rebuilt = status_record(attempt)
        live = ledger.views.get_view(rebuilt.name, rebuilt.key)
        if canonical(live) == canonical(rebuilt):
            report.identical += 1
            continue
        ledger.views.put_view(rebuilt, force=True)
        report.changed.append(attempt_id)
        report.written += 1
    return report


def rebuild_through_aggregate(ledger: Ledger) -> RebuildReport:
    """The first batched status rebuild: every row folded through the aggregate."""
    assert ledger.backend is not None and ledger.views is not None
    report = RebuildReport("status")
    for streams in ledger.backend.attempt_streams(ledger.backend.rebuild_batch):
        rows = [
            status_record(attempt)
            for attempt in (fold_attempt(ledger, events) for _, events in streams)
            if attempt is not None
        ]
        live = ledger.views.get_views(STATUS_VIEW, [r.key for r in rows])
        differing = [r for r in rows if canonical(live.get(r.key)) != canonical(r)]
        if differing:
            report.written += ledger.views.replace_views(differing, force=True)
        report.total += len(rows)
        report.identical += len(rows) - len(differing)
        report.changed.extend(r.key for r in differing)
    return report


@contextmanager
def standard_json() -> Iterator[None]:
    """Stored states decoded by the standard decoder only, as before orjson."""
    fast = json_decode.loads
    json_decode.loads = json_decode.standard_loads
    try:
        yield
    finally:
        json_decode.loads = fast
