"""``adapters.json_decode.loads`` decodes exactly as the standard decoder does
on the UTF-8 text: the same value (types included) or the same error, through orjson
or without it.

Property tests over the shapes of the events the ledger stores (canonical
bodies of every attempt event, with arbitrary content in their data) and over
arbitrary JSON, then the cases where orjson on its own answers otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters import json_decode
from domain.canonical import MAX_SAFE_INT, canonical_json

ROOT = Path(__file__).resolve().parents[2]
FEW = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def typed(value: Any) -> Any:
    """A value with the type of every node beside it, so that 1, 1.0 and True differ."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, value)


def answer(decode: Any, data: bytes) -> Any:
    try:
        return ("value", typed(decode(data)))
    except Exception as exc:  # the error must be the standard decoder's too
        return ("error", type(exc), str(exc))


def reference(data: bytes) -> Any:
    """What the mapper decoded stored states with before: the standard decoder
    (``json.loads`` but for the message it gives a byte order mark)."""
    return answer(lambda d: json.JSONDecoder().decode(d.decode("utf-8")), data)


def check(data: bytes) -> None:
    assert answer(json_decode.loads, data) == reference(data)
    assert answer(json_decode.standard_loads, data) == reference(data)


TEXT = st.text(
    alphabet=st.one_of(
        st.characters(blacklist_categories=("Cs",)),
        st.sampled_from(['"', "\\", "\x00", "\x1f", "\x7f", "\u2028", "\ufeff", "\U0010ffff"]),
    ),
    max_size=20,
)
SAFE_INT = st.integers(-MAX_SAFE_INT, MAX_SAFE_INT)
CONTENT = st.recursive(
    st.none() | st.booleans() | SAFE_INT | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
HASH = st.binary(min_size=32, max_size=32).map(lambda b: "sha256:" + b.hex())
MOMENT = st.datetimes(timezones=st.just(UTC)).map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


@st.composite
def event_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A canonical body of the shape the ledger stores (domain.base.event_body)."""
    data = {
        "at": draw(MOMENT),
        "generation": draw(st.integers(0, 10**6)),
        "prev_hash": draw(HASH),
        "attempt_id": "att_" + draw(HASH)[7:],
        "authorized": draw(st.lists(st.tuples(TEXT, st.integers(0, 10**9)).map(list))),
        "approval": draw(
            st.none() | st.fixed_dictionaries({"kind": TEXT, "approvers": st.lists(TEXT)})
        ),
        "receipt": draw(CONTENT),
        "spec": draw(st.dictionaries(TEXT, CONTENT, max_size=6)),
    }
    return {
        "data": {
            k: v for k, v in data.items() if k in draw(st.sets(st.sampled_from(sorted(data))))
        },
        "stream": "att_" + draw(HASH)[7:],
        "timestamp": draw(MOMENT),
        "type": draw(st.sampled_from(["ExecutionAttempt.Queued", "ExecutionAttempt.Leased"])),
        "version": draw(st.integers(1, 10**6)),
    }


@MANY
@given(event_bodies())
def test_stored_event_bodies_decode_alike(body: dict[str, Any]) -> None:
    data = canonical_json(body)
    check(data)
    assert json_decode.loads(data) == body


@FEW
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=25,
    )
)
def test_any_json_the_standard_encoder_writes_decodes_alike(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        check(text.encode("utf-8", "surrogatepass"))


@FEW
@given(st.binary(max_size=60))
def test_arbitrary_bytes_decode_or_fail_alike(data: bytes) -> None:
    check(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":123456789012345678901234567890}',  # orjson alone: a float
        b'{"a":-9223372036854775809}',
        b'{"a":18446744073709551616}',
        b'{"a":18446744073709551615}',
        b'{"a":"1234567890123456789012"}',  # a digit run in a string: the standard path
        b'{"a":NaN}',  # orjson alone refuses these three
        b'{"a":-Infinity}',
        b'{"a":"\\ud800"}',
        b'{"a":1e400}',
        b'{"a":1,"a":2}',
        b'{"a":-0}',
        b'{"a":-0.0}',
        b'{"a":1.5e-320}',
        b'{"a":"\\u0000\\uDBFF\\uDFFF"}',
        b' {"a":1} \n',
        b'{"a":1}x',
        b'{"a":"\xff"}',  # invalid UTF-8: the standard path's UnicodeDecodeError
        b'{"a":"\xed\xa0\x80"}',
        b"\xef\xbb\xbf{}",  # a byte order mark
        b'{"a":"\x01"}',  # a raw control character in a string
        b"",
        b"[" * 2000 + b"]" * 2000,  # deeper than orjson goes
    ],
)
def test_edge_cases_decode_or_fail_alike(data: bytes) -> None:
    check(data)


def test_without_orjson_every_decode_is_the_standard_one() -> None:
    assert json_decode.FAST  # orjson is a dependency: installed here
    script = (
        "import sys; sys.modules['orjson'] = None\n"  # an import of it fails
        "from adapters import json_decode as j\n"
        "assert not j.FAST and j.loads is j.standard_loads\n"
        "assert j.loads(b'{\"a\":[1,2.5,\"x\"]}') == {'a': [1, 2.5, 'x']}\n"
        "print('standard')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "standard"
