"""The view-change hub's close: a stopping process answers its long polls now."""

from __future__ import annotations

from adapters.view_changes import ViewChanges


def test_close_wakes_every_waiter_and_every_later_one_at_once() -> None:
    changes = ViewChanges()
    with changes.watch_blocking("status", "att_a") as early:
        assert not early.wait(0)  # nothing changed yet
        changes.close()
        assert early.wait(0) and early.take() is None  # woken: read the row now
    with changes.watch_blocking("status", "att_b") as late:
        assert late.wait(0)  # registered after the close: woken at once
    assert changes.closed
