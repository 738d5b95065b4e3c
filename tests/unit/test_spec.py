"""Canonical bytes and hashes of a ProposalSpec (design.md 4)."""

from __future__ import annotations

import json
import random
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from domain.errors import InvalidSpec
from domain.spec import (
    MAX_CONTENT_BYTES,
    MAX_CONTENT_DEPTH,
    MAX_CONTENT_NODES,
    MAX_CONTENT_STRING_CHARS,
    MAX_SAFE_INT,
    ProposalSpec,
    canonical_bytes,
    derive_attempt_id,
    derive_idempotency_key,
    parse_spec,
    payload_hash,
    view_hash,
)
from tests.support.factories import digest, spec_data

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RENDERER = "renderer:v1"
PREVIEW = "Create task 'Buy milk' in tasks"

# -- strategies ----------------------------------------------------------------

# Letters with combining forms, so NFC and NFD spellings differ.
COMPOSABLE = "aeiouncAEIOUNC \u00e9\u00e8\u00f1\u00e7\u00c5\u212b\u1e9b\u00f6\u0301\u0308:-_/"
composable_text = st.text(alphabet=COMPOSABLE, min_size=1, max_size=12)
any_text = st.text(max_size=16)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT),
    any_text,
    composable_text,
)
content_keys = st.one_of(any_text.filter(bool), composable_text).map(
    lambda key: unicodedata.normalize("NFC", key)
)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(content_keys, children, max_size=4),
    ),
    max_leaves=12,
)
contents = st.dictionaries(content_keys, json_values, max_size=5).filter(
    lambda c: _depth(c) <= MAX_CONTENT_DEPTH - 1
)
refs = st.one_of(composable_text, st.from_regex(r"[a-z]{1,8}:[0-9]{1,6}", fullmatch=True))
hex_digests = st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True)
names = st.from_regex(r"[a-z][a-z0-9_.\-]{0,20}", fullmatch=True)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
targets = st.fixed_dictionaries({"id": refs, "base_revision": refs})


@st.composite
def spec_payloads(draw: st.DrawFn) -> dict[str, Any]:
    """Random valid wire-format specs."""
    data = {
        "capability": draw(names),
        "executor_build": draw(hex_digests),
        "plugin_build": draw(hex_digests),
        "schema_digest": draw(hex_digests),
        "policy_digest": draw(hex_digests),
        "permission": draw(names),
        "effect": draw(names),
        "destination": draw(refs),
        "content": draw(contents),
        "sources": draw(st.lists(refs, max_size=4)),
        "expires_at": draw(instants).isoformat().replace("+00:00", "Z"),
    }
    if draw(st.booleans()):
        data["target"] = draw(targets)
    return data


def reorder(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every object's keys in a shuffled order."""
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {key: reorder(value[key], rnd) for key in keys}
    if isinstance(value, list):
        return [reorder(item, rnd) for item in value]
    return value


def normalize_strings(value: Any, form: str) -> Any:
    """The same JSON value with every string and key in Unicode form ``form``."""
    if isinstance(value, str):
        return unicodedata.normalize(form, value)
    if isinstance(value, dict):
        return {
            unicodedata.normalize(form, key): normalize_strings(item, form)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [normalize_strings(item, form) for item in value]
    return value


def hashes_of(data: dict[str, Any]) -> tuple[bytes, str, str]:
    spec = parse_spec(data)
    ph = payload_hash(spec)
    return canonical_bytes(spec), ph, view_hash(ph, RENDERER, PREVIEW)


# -- same meaning, same bytes ---------------------------------------------------


@FAST
@given(data=spec_payloads(), rnd=st.randoms(use_true_random=False))
def test_key_order_of_spec_and_content_does_not_change_bytes_or_hash(
    data: dict[str, Any], rnd: random.Random
) -> None:
    shuffled = reorder(data, rnd)

    assert hashes_of(shuffled) == hashes_of(data)


@FAST
@given(data=spec_payloads())
def test_nfc_and_nfd_spellings_give_the_same_bytes_and_hash(data: dict[str, Any]) -> None:
    nfc_bytes, nfc_hash, _ = hashes_of(normalize_strings(data, "NFC"))
    nfd_bytes, nfd_hash, _ = hashes_of(normalize_strings(data, "NFD"))

    assert nfd_bytes == nfc_bytes
    assert nfd_hash == nfc_hash


def test_canonical_bytes_hold_strings_in_nfc() -> None:
    decomposed = unicodedata.normalize("NFD", "Cr\u00e8me br\u00fbl\u00e9e")
    data = spec_data(destination=decomposed, content={decomposed: decomposed})

    text = canonical_bytes(parse_spec(data)).decode("utf-8")

    assert unicodedata.normalize("NFD", "\u00e8") not in text
    assert "Cr\u00e8me br\u00fbl\u00e9e" in text


def test_long_content_string_is_measured_after_nfc_normalization() -> None:
    composed = "\u00e9" * (MAX_CONTENT_STRING_CHARS // 2 + 1)  # NFD doubles its length
    nfc_bytes, nfc_hash, _ = hashes_of(spec_data(content={"t": composed}))
    nfd_bytes, nfd_hash, _ = hashes_of(
        spec_data(content={"t": unicodedata.normalize("NFD", composed)})
    )

    assert (nfd_bytes, nfd_hash) == (nfc_bytes, nfc_hash)


@FAST
@given(
    instant=instants,
    offset_minutes=st.integers(min_value=-14 * 60, max_value=14 * 60),
)
def test_same_instant_in_another_offset_gives_the_same_hash(
    instant: datetime, offset_minutes: int
) -> None:
    elsewhere = instant.astimezone(timezone(timedelta(minutes=offset_minutes)))
    utc_form = spec_data(expires_at=instant.isoformat().replace("+00:00", "Z"))
    offset_form = spec_data(expires_at=elsewhere.isoformat())

    assert hashes_of(offset_form) == hashes_of(utc_form)


def test_expiry_is_canonical_utc_with_z_and_no_empty_fraction() -> None:
    spec = parse_spec(spec_data(expires_at="2026-12-01T02:30:00.000+02:30"))

    assert b'"expires_at":"2026-12-01T00:00:00Z"' in canonical_bytes(spec)


def test_expiry_keeps_significant_fractional_seconds() -> None:
    whole = hashes_of(spec_data(expires_at="2026-12-01T00:00:00Z"))
    fraction = hashes_of(spec_data(expires_at="2026-12-01T00:00:00.5Z"))

    assert fraction[1] != whole[1]
    assert b'"expires_at":"2026-12-01T00:00:00.5Z"' in fraction[0]


@FAST
@given(data=spec_payloads())
def test_canonical_bytes_are_rfc8785(data: dict[str, Any]) -> None:
    spec = parse_spec(data)
    raw = canonical_bytes(spec)

    assert rfc8785.dumps(json.loads(raw)) == raw
    assert json.loads(raw) == spec.canonical_dict()


@FAST
@given(data=spec_payloads())
def test_canonical_bytes_survive_a_round_trip_through_parse(data: dict[str, Any]) -> None:
    spec = parse_spec(data)

    again = parse_spec(json.loads(canonical_bytes(spec)))

    assert canonical_bytes(again) == canonical_bytes(spec)
    assert again == spec


def test_absent_target_is_omitted_not_null() -> None:
    data = spec_data()
    del data["target"]

    raw = canonical_bytes(parse_spec(data))

    assert b'"target"' not in raw
    assert b"null" not in raw


def test_explicit_null_target_means_the_same_as_absent() -> None:
    absent = spec_data()
    del absent["target"]

    assert hashes_of(spec_data(target=None)) == hashes_of(absent)


def test_null_inside_content_is_kept_as_a_value() -> None:
    raw = canonical_bytes(parse_spec(spec_data(content={"due": None})))

    assert b'"content":{"due":null}' in raw


# -- every semantic change changes both hashes -----------------------------------


def _changed(old: Any, new: Any) -> bool:
    return normalize_strings(old, "NFC") != normalize_strings(new, "NFC")


FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "capability": names,
    "executor_build": hex_digests,
    "plugin_build": hex_digests,
    "schema_digest": hex_digests,
    "policy_digest": hex_digests,
    "permission": names,
    "effect": names,
    "destination": refs,
    "content": contents,
    "sources": st.lists(refs, max_size=4),
    "expires_at": instants.map(lambda moment: moment.isoformat()),
}


@pytest.mark.parametrize("field", sorted(FIELD_VALUES))
@FEW
@given(data=st.data())
def test_changing_a_field_changes_payload_and_view_hash(field: str, data: st.DataObject) -> None:
    base = data.draw(spec_payloads())
    new_value = data.draw(FIELD_VALUES[field])
    if field == "expires_at":
        changed = parse_spec(base).expires_at != datetime.fromisoformat(new_value)
    else:
        changed = _changed(base[field], new_value)
    assume(changed)
    _, old_payload, old_view = hashes_of(base)

    _, new_payload, new_view = hashes_of({**base, field: new_value})

    assert new_payload != old_payload
    assert new_view != old_view


@pytest.mark.parametrize("part", ["id", "base_revision"])
@FEW
@given(target=targets, replacement=refs)
def test_changing_the_target_changes_both_hashes(
    part: str, target: dict[str, str], replacement: str
) -> None:
    assume(_changed(target[part], replacement))
    _, old_payload, old_view = hashes_of(spec_data(target=target))

    _, new_payload, new_view = hashes_of(spec_data(target={**target, part: replacement}))

    assert new_payload != old_payload
    assert new_view != old_view


def test_adding_or_removing_the_target_changes_both_hashes() -> None:
    without = spec_data()
    del without["target"]

    _, with_payload, with_view = hashes_of(spec_data())
    _, without_payload, without_view = hashes_of(without)

    assert with_payload != without_payload
    assert with_view != without_view


def _leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a nested value (containers included)."""
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            paths += _leaf_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            paths += _leaf_paths(item, (*prefix, index))
    return paths


def _replace_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {k: (_replace_at(v, tuple(rest), new) if k == head else v) for k, v in value.items()}
    return [(_replace_at(v, tuple(rest), new) if i == head else v) for i, v in enumerate(value)]


def _get_at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@FAST
@given(data=st.data())
def test_changing_any_nested_content_value_changes_both_hashes(data: st.DataObject) -> None:
    content = data.draw(contents.filter(bool))
    path = data.draw(st.sampled_from(_leaf_paths(content)))
    replacement = data.draw(json_values)
    assume(_changed(_get_at(content, path), replacement))
    changed_content = _replace_at(content, path, replacement)
    _, old_payload, old_view = hashes_of(spec_data(content=content))

    _, new_payload, new_view = hashes_of(spec_data(content=changed_content))

    assert new_payload != old_payload
    assert new_view != old_view


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"a": None}, {}),
        ({"a": 1}, {"a": "1"}),
        ({"a": True}, {"a": 1}),
        ({"a": False}, {"a": 0}),
        ({"a": []}, {"a": {}}),
        ({"a": [1, 2]}, {"a": [2, 1]}),
        ({"a": ""}, {"a": None}),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": None}}),
    ],
)
def test_json_values_that_differ_in_type_or_presence_hash_differently(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    assert hashes_of(spec_data(content=before))[1] != hashes_of(spec_data(content=after))[1]


@FAST
@given(
    instant=instants,
    delta_ms=st.integers(min_value=1, max_value=10**9)
    | st.integers(max_value=-1, min_value=-(10**9)),
)
def test_a_different_expiry_instant_changes_the_hash(instant: datetime, delta_ms: int) -> None:
    later = instant + timedelta(milliseconds=delta_ms)

    first = hashes_of(spec_data(expires_at=instant.isoformat()))
    second = hashes_of(spec_data(expires_at=later.isoformat()))

    assert first[1] != second[1]


# -- view hash and derivations ---------------------------------------------------


@FAST
@given(
    payload=hex_digests,
    renderer=st.text(min_size=1, max_size=20),
    text=st.text(max_size=40),
    other=st.text(max_size=40),
)
def test_view_hash_changes_with_renderer_build_and_text(
    payload: str, renderer: str, text: str, other: str
) -> None:
    assume(_changed(renderer, other) and _changed(text, other))
    base = view_hash(payload, renderer, text)

    assert view_hash(payload, renderer, text) == base
    assert view_hash(payload, other, text) != base
    assert view_hash(payload, renderer, other) != base


def test_view_hash_changes_with_payload_hash() -> None:
    assert view_hash(digest("1"), RENDERER, PREVIEW) != view_hash(digest("2"), RENDERER, PREVIEW)


def test_view_hash_ignores_unicode_spelling_of_the_text() -> None:
    nfd = unicodedata.normalize("NFD", "Cr\u00e8me")

    assert view_hash(digest("1"), RENDERER, nfd) == view_hash(digest("1"), RENDERER, "Cr\u00e8me")


proposal_ids = st.from_regex(r"prop_[0-9a-f]{1,16}", fullmatch=True)
versions = st.integers(min_value=1, max_value=10_000)


@FAST
@given(proposal_id=proposal_ids, version=versions, payload=hex_digests)
def test_attempt_id_and_idempotency_key_are_deterministic_and_distinct(
    proposal_id: str, version: int, payload: str
) -> None:
    attempt_id = derive_attempt_id(proposal_id, version, payload)
    key = derive_idempotency_key(proposal_id, version, payload)

    assert derive_attempt_id(proposal_id, version, payload) == attempt_id
    assert derive_idempotency_key(proposal_id, version, payload) == key
    assert attempt_id.removeprefix("att_") != key.removeprefix("idk_")


@pytest.mark.parametrize(
    "derive", [derive_attempt_id, derive_idempotency_key], ids=["attempt_id", "idempotency_key"]
)
@FAST
@given(
    first=st.tuples(proposal_ids, versions, hex_digests),
    second=st.tuples(proposal_ids, versions, hex_digests),
)
def test_derivations_change_with_proposal_id_version_and_payload_hash(
    derive: Callable[[str, int, str], str],
    first: tuple[str, int, str],
    second: tuple[str, int, str],
) -> None:
    assume(all(a != b for a, b in zip(first, second, strict=True)))
    for index in range(3):
        mixed = list(first)
        mixed[index] = second[index]
        assert derive(*mixed) != derive(*first)  # type: ignore[arg-type]


def test_derivations_do_not_collide_on_concatenation() -> None:
    assert derive_attempt_id("prop_1", 12, digest("a")) != derive_attempt_id(
        "prop_11", 2, digest("a")
    )


# -- rejected input ------------------------------------------------------------------


def rejected(data: Any) -> InvalidSpec:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(data)
    return caught.value


CANARY = "zqxcanary9731"


@FAST
@given(
    number=st.floats(allow_nan=False, allow_infinity=False),
    where=st.sampled_from(["top", "nested", "list"]),
)
def test_non_integer_numbers_in_content_are_rejected(number: float, where: str) -> None:
    content: dict[str, Any] = {
        "top": {"n": number},
        "nested": {"a": {"b": number}},
        "list": {"a": [1, number]},
    }[where]

    error = rejected(spec_data(content=content))

    assert error.detail.startswith("/content")


def test_integral_float_is_rejected_like_any_float() -> None:
    error = rejected(spec_data(content={"count": 1.0}))

    assert "content" in error.detail
    assert "integer" in error.detail


@FAST
@given(number=st.integers(min_value=MAX_SAFE_INT + 1) | st.integers(max_value=-MAX_SAFE_INT - 1))
def test_integers_beyond_the_safe_range_are_rejected(number: int) -> None:
    error = rejected(spec_data(content={"a": [number]}))

    assert error.detail.startswith("/content")
    assert str(number) not in error.detail


def test_integers_at_the_safe_bounds_are_accepted() -> None:
    spec = parse_spec(spec_data(content={"max": MAX_SAFE_INT, "min": -MAX_SAFE_INT}))

    assert spec.content == {"max": MAX_SAFE_INT, "min": -MAX_SAFE_INT}


@pytest.mark.parametrize("where", ["top", "target"])
def test_unknown_fields_are_rejected_without_echoing_their_name(where: str) -> None:
    secret_key = f"sk_live_{CANARY}"
    data = spec_data()
    if where == "top":
        data[secret_key] = "x"
    else:
        data["target"][secret_key] = "x"

    error = rejected(data)

    assert CANARY not in error.detail
    # a secret-shaped key is never named: the pointer shows where, with `*` for it
    expected = "/target/*" if where == "target" else "/*"
    assert error.detail == f"unknown field {expected} is not permitted"


def test_a_plain_unknown_field_is_named() -> None:
    error = rejected({**spec_data(), "colour": "blue"})

    assert error.detail == "unknown field /colour is not permitted"
    assert [(p.pointer, p.location) for p in error.problems] == [("/colour", "body")]


REQUIRED = [
    "capability",
    "executor_build",
    "plugin_build",
    "schema_digest",
    "policy_digest",
    "permission",
    "effect",
    "destination",
    "content",
    "sources",
    "expires_at",
]


@pytest.mark.parametrize("field", REQUIRED)
def test_missing_required_field_is_rejected_and_named(field: str) -> None:
    data = spec_data()
    del data[field]

    error = rejected(data)

    assert error.detail.startswith(f"/{field}")


@pytest.mark.parametrize("part", ["id", "base_revision"])
def test_target_without_id_or_base_revision_is_rejected(part: str) -> None:
    data = spec_data()
    del data["target"][part]

    assert rejected(data).detail.startswith(f"/target/{part}: ")


DIGEST_FIELDS = ["executor_build", "plugin_build", "schema_digest", "policy_digest"]
BAD_DIGESTS = [
    "sha256:" + "A" * 64,
    "sha256:" + "a" * 63,
    "sha256:" + "a" * 65,
    "sha1:" + "a" * 40,
    "a" * 64,
    "sha256:" + "g" * 64,
    f"sha256:{CANARY}",
    "",
]


@pytest.mark.parametrize("field", DIGEST_FIELDS)
@pytest.mark.parametrize("bad", BAD_DIGESTS)
def test_bad_digests_are_rejected_and_named(field: str, bad: str) -> None:
    error = rejected(spec_data(**{field: bad}))

    assert error.detail.startswith(f"/{field}")
    assert CANARY not in error.detail


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("capability", f"Fake {CANARY}"),
        ("permission", f"TASKS.{CANARY}"),
        ("effect", f"create {CANARY}"),
        ("destination", CANARY * 30),
        ("destination", ""),
        ("sources", [CANARY * 30]),
        ("sources", CANARY),
        ("expires_at", CANARY),
        ("expires_at", "2026-12-01T00:00:00"),
        ("target", CANARY),
        ("target", {"id": CANARY * 30, "base_revision": "r1"}),
        ("content", CANARY),
        ("content", [CANARY]),
        ("content", {"x": 1.5, "note": CANARY}),
        ("content", {"x": CANARY * 1000}),
        ("content", {CANARY * 20: 1}),
    ],
)
def test_invalid_values_are_named_but_never_echoed(field: str, value: Any) -> None:
    error = rejected(spec_data(**{field: value}))

    assert error.detail.startswith(f"/{field}")
    assert CANARY not in error.detail
    assert "zqx" not in str(error)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("destination", "tasks\ud800"),
        ("sources", ["message:\udfff"]),
        ("target", {"id": "task:\ud83d", "base_revision": "r1"}),
        ("content", {"title": "milk\ud800"}),
        ("content", {"\ud800": 1}),
    ],
)
def test_lone_surrogates_are_rejected_at_parse_time(field: str, value: Any) -> None:
    error = rejected(spec_data(**{field: value}))

    assert error.detail.startswith(f"/{field}")
    assert "\\ud" not in error.detail.lower()


def test_not_a_mapping_is_rejected() -> None:
    assert isinstance(rejected([spec_data()]), InvalidSpec)


def test_oversize_content_is_rejected() -> None:
    chunk = "x" * 4000
    content = {f"k{i}": chunk for i in range(MAX_CONTENT_BYTES // 4000 + 1)}

    error = rejected(spec_data(content=content))

    assert error.detail.startswith("/content")
    assert "larger" in error.detail


def test_content_just_under_the_byte_limit_is_accepted() -> None:
    overhead = len(rfc8785.dumps({"a": "", "b": "", "c": ""}))
    room = MAX_CONTENT_BYTES - overhead
    content = {"a": "x" * (room // 3), "b": "x" * (room // 3), "c": "x" * (room - 2 * (room // 3))}

    assert len(rfc8785.dumps(content)) == MAX_CONTENT_BYTES
    assert parse_spec(spec_data(content=content)).content == content


def test_content_nested_too_deep_is_rejected() -> None:
    content: dict[str, Any] = {"leaf": 1}
    for _ in range(MAX_CONTENT_DEPTH + 1):
        content = {"n": content}

    assert "deeper" in rejected(spec_data(content=content)).detail


def test_content_with_too_many_values_is_rejected() -> None:
    content = {"items": list(range(MAX_CONTENT_NODES + 1))}

    assert "more than" in rejected(spec_data(content=content)).detail


def test_content_keys_equal_after_nfc_are_rejected() -> None:
    composed = "caf\u00e9"
    content = {composed: 1, unicodedata.normalize("NFD", composed): 2}

    assert rejected(spec_data(content=content)).detail.startswith("/content")


def test_parse_spec_accepts_the_wire_example() -> None:
    spec = parse_spec(spec_data())

    assert isinstance(spec, ProposalSpec)
    assert spec.target is not None and spec.target.base_revision == "r7"
    assert spec.expires_at == datetime(2026, 12, 1, tzinfo=UTC)
