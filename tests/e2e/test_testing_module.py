"""``api.testing``: a ledger whose clock and worker move only when a test moves them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.executors.fake import FAKE_CAPABILITIES, fake_build_digest
from api.testing import open_test_ledger

START = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)


def test_the_fake_builds_are_allowed_and_the_clock_stands_still() -> None:
    with open_test_ledger(start_at=START) as ledger:
        for capability, mode in FAKE_CAPABILITIES.items():
            build = ledger.get_executor_build(capability, fake_build_digest(capability))
            assert build.available and build.delivery_mode is mode
        assert not ledger.running
        assert ledger.clock.now() == START
        assert ledger.next_due() is None
        ledger.advance(90)
        assert ledger.clock.now() == datetime(2026, 5, 1, 9, 31, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("capability", "settled", "calls"),
    [
        ("fake.provider_idempotency", "succeeded", 2),  # retried with the same key
        ("fake.correlation_lookup", "succeeded", 1),  # looked up, not called again
        ("fake.operator_only", "outcome_unknown", 1),  # left to a human, never retried
    ],
)
def test_run_until_idle_moves_the_clock_through_each_delivery_mode(
    capability: str, settled: str, calls: int
) -> None:
    with open_test_ledger(start_at=START) as ledger:
        alice = ledger.add_approver("alice")
        attempt_id = ledger.approved(
            alice, ledger.fake_spec(capability, simulate="timeout_after_effect")
        )
        assert ledger.status(attempt_id).status == "queued"
        first = ledger.run_until_idle()
        assert first.advanced_seconds == 0 and ledger.clock.now() == START
        report = ledger.run_until_idle(advance_clock=True)
        assert ledger.status(attempt_id).status == settled
        lease = ledger.wiring.settings.lease_seconds
        assert report.advanced_seconds == (lease if settled == "succeeded" else 0)
        assert ledger.effects.call_count() == calls
        assert ledger.effects.max_effects_per_key() == 1
        assert ledger.next_due() is None
        listed = ledger.attempts(settled).items  # the subscribers ran: the lists are current
        assert [a.attempt_id for a in listed] == [attempt_id]


def test_one_step_at_a_time_and_a_bound_on_the_ticks() -> None:
    with open_test_ledger(start_at=START) as ledger:
        alice = ledger.add_approver("alice", permissions=["tasks.write", "social.post"])
        ok = ledger.approved(alice, ledger.fake_spec())
        assert ledger.process(ok).value == "succeeded"
        assert ledger.process(ok).value == "skipped"  # a duplicate delivery changes nothing
        assert ledger.recover().examined == 0
        lost = ledger.approved(alice, ledger.fake_spec(simulate="timeout_after_effect"))
        with pytest.raises(RuntimeError, match="still due after 1 recovery ticks"):
            ledger.run_until_idle(advance_clock=True, max_ticks=1)
        assert ledger.status(lost).status == "executing"
        assert ledger.get_grant("alice", "social.post").granted


def test_a_test_ledger_on_an_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with open_test_ledger(store="sqlite", sqlite_path=str(db)) as ledger:
        alice = ledger.add_approver("alice")
        attempt_id = ledger.approved(alice, ledger.fake_spec())
        ledger.run_until_idle()
        assert ledger.status(attempt_id).status == "succeeded"
    assert db.exists()
