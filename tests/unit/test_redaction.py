"""The one redaction (I10) that audit timelines and log lines share."""

from __future__ import annotations

from domain.redaction import REDACTED, redact
from projections.audit import REDACTED_KEYS


def test_listed_keys_are_hidden_at_any_depth_and_in_any_case() -> None:
    data = {"Content": {"title": "x"}, "outer": [{"content": "y", "kept": 1}], "kept": "ok"}
    assert redact(data, {"content"}) == {
        "Content": REDACTED,
        "outer": [{"content": REDACTED, "kept": 1}],
        "kept": "ok",
    }


def test_secret_shaped_keys_and_values_are_hidden_without_being_listed() -> None:
    data = {
        "api_key": "plain",
        "note": "password=hunter2",
        "nested": ("Bearer abc.def", "fine"),
        "count": 3,
    }
    assert redact(data) == {
        "api_key": REDACTED,
        "note": REDACTED,
        "nested": [REDACTED, "fine"],
        "count": 3,
    }


def test_redact_copies_and_never_changes_its_input() -> None:
    data = {"token": "t", "inner": {"content": "c"}}
    redact(data, REDACTED_KEYS)
    assert data == {"token": "t", "inner": {"content": "c"}}


def test_the_audit_keys_hide_tokens_keys_and_lease_owners() -> None:
    event = {
        "token_hash": "h",
        "idempotency_key": "idk_1",
        "owner": "lease_1",
        "attempt_id": "att_1",
        "status": "queued",
    }
    assert redact(event, REDACTED_KEYS) == {
        "token_hash": REDACTED,
        "idempotency_key": REDACTED,
        "owner": REDACTED,
        "attempt_id": "att_1",
        "status": "queued",
    }
