"""The fast canonical encoder writes exactly the bytes of the RFC 8785 reference.

Over the values the ledger admits (JSON with integers within +-(2**53 - 1) and
valid Unicode text) the C encoder must be taken and agree byte for byte with
the ``rfc8785`` package; over everything else the result, or the error, must
be the reference's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain import canonical
from domain.canonical import MAX_SAFE_INT, canonical_json, fast_domain
from domain.spec import format_utc

MANY = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Valid Unicode: every code point but the surrogates, weighted towards the
# characters whose encoding differs (controls, quotes, U+007F, U+2028, the top
# of the BMP, non-BMP).
EDGES = st.sampled_from(
    [chr(c) for c in range(0x20)]
    + [
        '"',
        "\\",
        "/",
        "\x7f",
        "\u2028",
        "\u2029",
        "\ue000",
        "\uffee",
        "\ufffd",
        "\uffff",
        "\U00010000",
        "\U0001f600",
        "\U0010ffff",
        "\u00e9",
        "\u0301",
        "a",
        "Z",
        "0",
    ]
)
CHARS = st.one_of(EDGES, st.characters(blacklist_categories=("Cs",)))
TEXT = st.text(CHARS, max_size=12)
SAFE_INT = st.one_of(
    st.integers(-MAX_SAFE_INT, MAX_SAFE_INT),
    st.sampled_from([MAX_SAFE_INT, -MAX_SAFE_INT, 0, -1, 2**31, 2**32]),
)


def admitted(keys: st.SearchStrategy[str] = TEXT) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), SAFE_INT, TEXT)
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=5),
            st.tuples(inner, inner),
            st.dictionaries(keys, inner, max_size=6),
        ),
        max_leaves=30,
    )


BMP_KEYS = st.text(st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",)), max_size=8)


@MANY
@given(value=admitted(BMP_KEYS))
def test_admitted_values_with_bmp_keys_take_the_fast_path_and_match(value: Any) -> None:
    assert fast_domain(value)
    assert canonical_json(value) == rfc8785.dumps(value)


@MANY
@given(value=admitted())
def test_every_admitted_value_matches_the_reference(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


def outcome(encode: Any, value: Any) -> tuple[str, Any]:
    try:
        return "bytes", encode(value)
    except Exception as exc:  # the type of the error is what must agree
        return "error", type(exc)


ANY_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.sampled_from(
        ["\ud800", "a\udfffb", 2**53, -(2**53), 1.0, -0.0, 1e21, 5e-324, float("nan"), float("inf")]
    ),
)


@MANY
@given(
    value=st.recursive(
        ANY_SCALAR,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(
                st.one_of(st.text(), st.integers(), st.sampled_from(["\ud800"])), inner, max_size=4
            ),
        ),
        max_leaves=12,
    )
)
def test_outside_the_admitted_values_the_result_or_error_is_the_reference_one(value: Any) -> None:
    assert outcome(canonical_json, value) == outcome(rfc8785.dumps, value)


class Colour(StrEnum):
    RED = "red"


EDGE_CASES: list[Any] = [
    # UTF-16 order differs from code point order: must fall back and still match.
    {"\U0001f600": 1, "\ue000": 2},
    {"\ue000": {"\U00010000": [], "\uffff": None}},
    {"\ud7ff": 1, "\ue000": 2, "a": 3},
    # Every control character, quotes, backslash, DEL and the line separators.
    {"s": "".join(chr(c) for c in range(0x20)) + '"\\/\x7f\u2028\u2029'},
    {"".join(chr(c) for c in range(1, 0x20)): "key of controls"},
    # The integer bounds, inside and out.
    [MAX_SAFE_INT, -MAX_SAFE_INT, 0, -0],
    [MAX_SAFE_INT + 1],
    [-(MAX_SAFE_INT + 1)],
    [10**30],
    # Floats are outside the admitted values (the reference formats them).
    [1.0, 0.5, -0.0, 1e21, 1e-7, 123456789.125],
    # Types the two encoders could treat differently.
    {"enum": Colour.RED, "tuple": (1, "a"), "bool": True, "none": None},
    {"": "", "nested": {"": []}},
    {1: "int key"},
    "top-level string \U0001f600",
    MAX_SAFE_INT,
    None,
    {"lone": "\ud800"},
    {"\udfff": "lone key"},
]


@pytest.mark.parametrize("value", EDGE_CASES, ids=lambda v: repr(v)[:40])
def test_edge_cases_match_the_reference(value: Any) -> None:
    assert outcome(canonical_json, value) == outcome(rfc8785.dumps, value)


@pytest.mark.parametrize(
    "value",
    [
        {"\U0001f600": 1},
        [MAX_SAFE_INT + 1],
        [0.5],
        {1: "x"},
        {"x": object()},
        b"bytes",
    ],
)
def test_values_outside_the_proven_domain_go_to_the_reference(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    reference = rfc8785.dumps

    def spy(obj: Any) -> bytes:
        calls.append(obj)
        return reference(obj)

    monkeypatch.setattr(canonical.rfc8785, "dumps", spy)
    assert not fast_domain(value)
    outcome(canonical_json, value)
    assert calls == [value]


def test_a_lone_surrogate_in_an_admitted_shape_gets_the_reference_error() -> None:
    assert fast_domain({"a": "\ud800"})
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_json({"a": "\ud800"})


@MANY
@given(moment=st.datetimes(timezones=st.timezones()))
def test_event_times_are_written_as_strftime_wrote_them(moment: datetime) -> None:
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:
        return
    before = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        before += f".{utc.microsecond:06d}".rstrip("0")
    assert format_utc(moment) == before + "Z"
