"""Directory records and the validation of their values (design.md 2.5, I7)."""

from __future__ import annotations

from typing import Any

import pytest

from domain.directory import (
    DeliveryMode,
    DirectoryKind,
    DirectoryRecord,
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    target_record_id,
    validate_digest,
    validate_ident,
    validate_name,
    validate_values,
)
from domain.errors import InvalidInput
from domain.timeutil import format_utc
from tests.support.factories import T0, digest
from tests.support.replay import Replay

AT = format_utc(T0)
CANARY = "zqxcanary4417"

VALID: dict[DirectoryKind, dict[str, Any]] = {
    DirectoryKind.ACTOR: {"enabled": True},
    DirectoryKind.IDENTITY_BINDING: {
        "actor_id": "alice",
        "channel": "slack",
        "external_id": "U123",
        "active": True,
    },
    DirectoryKind.CHANNEL_BINDING: {
        "conversation_key": "C42",
        "channel": "slack",
        "active": True,
    },
    DirectoryKind.PERMISSION_GRANT: {"granted": True},
    DirectoryKind.EXECUTOR_BUILD: {
        "delivery_mode": "correlation_lookup",
        "available": True,
    },
    DirectoryKind.TARGET: {"revision": "r7"},
    DirectoryKind.POLICY_SET: {"text": "", "digest": "sha256:" + "0" * 64, "policies": []},
    DirectoryKind.STANDING_GRANT: {
        "grant_id": "sgr_1",
        "actor_id": "alice",
        "capability": "tasks.create",
        "conditions": [],
        "expires_at": "2100-01-01T00:00:00Z",
        "max_uses": 3,
        "uses": 0,
        "revoked": False,
        "granted_by": {"kind": "admin", "subject": "ops"},
        "granted_at": "2099-01-01T00:00:00Z",
    },
    DirectoryKind.STANDING_GRANT_INDEX: {"actor_id": "alice", "grant_ids": ["sgr_1"]},
    DirectoryKind.STANDING_GRANT_USES: {"grant_id": "sgr_1", "shard": 0, "quota": 2, "uses": 1},
    DirectoryKind.STANDING_GRANT_FENCE: {
        "grant_id": "sgr_1",
        "fence": 0,
        "revoked_at": "2099-01-02T00:00:00Z",
    },
}


def register(replay: Replay, kind: DirectoryKind, values: dict[str, Any]) -> DirectoryRecord:
    return replay.track(
        DirectoryRecord(record_id=f"{kind.value}:x", kind=kind.value, values=values, at=AT)
    )


# -- records ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(DirectoryKind))
def test_registered_record_holds_its_kind_and_values(replay: Replay, kind: DirectoryKind) -> None:
    values = validate_values(kind, VALID[kind])

    record = register(replay, kind, values)

    assert record.kind is kind
    assert record.values == VALID[kind]
    assert record.revision == 1
    assert record.updated_at == AT


def test_unchanged_update_appends_nothing(replay: Replay) -> None:
    record = register(replay, DirectoryKind.ACTOR, {"enabled": True})

    changed = record.update({"enabled": True}, at=format_utc(T0.replace(hour=13)))

    assert changed is False
    assert record.revision == 1
    assert record.updated_at == AT
    assert len(replay.events_of(record)) == 1


def test_changed_update_appends_one_event(replay: Replay) -> None:
    record = register(replay, DirectoryKind.ACTOR, {"enabled": True})
    later = format_utc(T0.replace(hour=13))

    changed = record.update({"enabled": False}, at=later)

    assert changed is True
    assert record.revision == 2
    assert record.flag("enabled") is False
    assert record.updated_at == later
    assert [type(e).__name__ for e in replay.events_of(record)] == ["Registered", "Changed"]


def test_revocation_then_regrant_is_audited_as_two_changes(replay: Replay) -> None:
    record = register(replay, DirectoryKind.PERMISSION_GRANT, {"granted": True})

    record.update({"granted": False}, at=AT)
    record.update({"granted": True}, at=AT)

    assert record.revision == 3
    assert record.flag("granted") is True


def test_flag_and_text_read_values_with_safe_defaults(replay: Replay) -> None:
    record = register(replay, DirectoryKind.IDENTITY_BINDING, VALID[DirectoryKind.IDENTITY_BINDING])

    assert record.flag("active") is True
    assert record.flag("missing") is False
    assert record.text("external_id") == "U123"
    assert record.text("missing") == ""


def test_replay_rebuilds_a_record_exactly(replay: Replay) -> None:
    record = register(replay, DirectoryKind.EXECUTOR_BUILD, VALID[DirectoryKind.EXECUTOR_BUILD])
    record.update({"delivery_mode": "correlation_lookup", "available": False}, at=AT)

    rebuilt = replay.rebuild(record)

    assert rebuilt.kind is DirectoryKind.EXECUTOR_BUILD
    assert rebuilt.values == {"delivery_mode": "correlation_lookup", "available": False}
    assert rebuilt.revision == 2


# -- record ids -----------------------------------------------------------------------------


def test_record_ids_are_readable_and_deterministic() -> None:
    assert actor_record_id("alice") == "actor:alice"
    assert identity_binding_record_id("ib-1") == "identity-binding:ib-1"
    assert channel_binding_record_id("cb-1") == "channel-binding:cb-1"
    assert grant_record_id("alice", "tasks.write") == "grant:alice:tasks.write"
    assert executor_build_record_id("fake.x", digest("a")) == f"executor-build:fake.x:{digest('a')}"
    assert target_record_id("task:42") == "target:task:42"


# -- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(DeliveryMode))
def test_every_delivery_mode_is_a_valid_executor_build_value(mode: DeliveryMode) -> None:
    values = validate_values(
        DirectoryKind.EXECUTOR_BUILD, {"delivery_mode": mode.value, "available": True}
    )

    assert values["delivery_mode"] == mode.value


@pytest.mark.parametrize("kind", list(DirectoryKind))
def test_unknown_value_fields_are_rejected_without_echoing_them(kind: DirectoryKind) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_values(kind, {**VALID[kind], f"sk_live_{CANARY}": True})

    assert CANARY not in caught.value.detail
    assert "unknown field" in caught.value.detail


@pytest.mark.parametrize("kind", list(DirectoryKind))
def test_missing_value_fields_are_rejected_and_named(kind: DirectoryKind) -> None:
    field = sorted(VALID[kind])[0]
    values = {k: v for k, v in VALID[kind].items() if k != field}

    with pytest.raises(InvalidInput) as caught:
        validate_values(kind, values)

    assert caught.value.detail.startswith(f"/{field}: ")
    assert [p.pointer for p in caught.value.problems] == [f"/{field}"]


@pytest.mark.parametrize("sent", ["true", 1, "yes", None])
def test_flags_must_be_real_booleans(sent: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_values(DirectoryKind.ACTOR, {"enabled": sent})

    assert caught.value.detail.startswith("/enabled: ")
    assert [p.pointer for p in caught.value.problems] == ["/enabled"]


@pytest.mark.parametrize(
    ("kind", "values"),
    [
        (DirectoryKind.EXECUTOR_BUILD, {"delivery_mode": CANARY, "available": True}),
        (
            DirectoryKind.IDENTITY_BINDING,
            {
                "actor_id": f"not valid {CANARY}",
                "channel": "slack",
                "external_id": "U1",
                "active": True,
            },
        ),
        (
            DirectoryKind.IDENTITY_BINDING,
            {"actor_id": "alice", "channel": f"Slack{CANARY}", "external_id": "U1", "active": True},
        ),
        (
            DirectoryKind.CHANNEL_BINDING,
            {"conversation_key": CANARY * 30, "channel": "slack", "active": True},
        ),
        (DirectoryKind.TARGET, {"revision": ""}),
        (DirectoryKind.TARGET, {"revision": "r\ud800"}),
    ],
)
def test_invalid_values_are_rejected_without_echoing_them(
    kind: DirectoryKind, values: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_values(kind, values)

    assert CANARY not in caught.value.detail
    assert "\ud800" not in caught.value.detail


def test_values_are_nfc_normalized() -> None:
    values = validate_values(DirectoryKind.TARGET, {"revision": "re\u0301v"})

    assert values == {"revision": "r\u00e9v"}


@pytest.mark.parametrize("good", ["alice", "A1", "user@example", "ib:slack:U1", "a.b-c_d"])
def test_valid_idents_pass(good: str) -> None:
    assert validate_ident(good, "actor_id") == good


@pytest.mark.parametrize("bad", ["", "-alice", "has space", "x" * 129, 42, f"{CANARY}/x"])
def test_invalid_idents_are_rejected_with_the_field_name(bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_ident(bad, "actor_id")

    assert caught.value.detail.startswith("path parameter actor_id: ")
    assert [(p.pointer, p.location) for p in caught.value.problems] == [("/actor_id", "path")]
    assert CANARY not in caught.value.detail


@pytest.mark.parametrize("bad", ["Tasks.write", "1tasks", "", "tasks write"])
def test_invalid_names_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_name(bad, "permission")

    assert caught.value.detail.startswith("path parameter permission: ")


def test_valid_name_passes() -> None:
    assert validate_name("tasks.write", "permission") == "tasks.write"


@pytest.mark.parametrize("bad", ["sha256:" + "A" * 64, "sha256:abc", "md5:" + "a" * 32])
def test_invalid_digests_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_digest(bad, "build_digest")

    assert caught.value.detail.startswith("path parameter build_digest: ")


def test_valid_digest_passes() -> None:
    assert validate_digest(digest("f"), "build_digest") == digest("f")
