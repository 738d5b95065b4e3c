"""RFC 8785 canonical JSON, through the standard ``json`` encoder where that is proven equal.

Every hash in the ledger is SHA-256 over RFC 8785 bytes (design.md 4). The
``rfc8785`` package is the reference; it is pure Python and was the largest
single cost of a lifecycle. For the values the ledger admits, the standard
library's encoder (``json.JSONEncoder``, which runs its C accelerator) with
sorted keys, no whitespace and no ASCII escaping writes the same bytes:

- ``null``, ``true``, ``false`` and integers are written alike (integers only
  within +-(2**53 - 1), RFC 8785's exact range);
- strings: both escape ``"`` and ``\\``, use ``\\b \\f \\n \\r \\t`` and
  lower-case ``\\u00xx`` for the other control characters, and write every
  other character as its UTF-8 bytes (U+007F, U+2028 and non-BMP included);
- arrays alike (tuples as arrays);
- object keys: RFC 8785 sorts by UTF-16 code units, Python by code points; the
  two orders agree unless a key holds a character above U+FFFF (a surrogate
  pair sorts below U+E000..U+FFFF in UTF-16), so such objects are not taken.

``fast_domain`` is that guard: anything outside it (floats, larger integers,
non-string or non-BMP keys, other types) goes to the reference encoder, and so
does any value the standard encoder fails on (a lone surrogate), so errors are
the reference's too. Only the encoder's public options are used: building its
C encoder once by its private name, instead of once per call, saved about one
microsecond per event body, 3% of a lifecycle, not worth breaking on an
upgrade. ``tests/unit/test_canonical.py`` proves the equality with a property
test against the ``rfc8785`` package and explicit edge cases.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

MAX_SAFE_INT = 2**53 - 1


def _unsupported(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


_encode = json.JSONEncoder(
    ensure_ascii=False,
    sort_keys=True,
    separators=(",", ":"),
    allow_nan=False,
    check_circular=False,
    default=_unsupported,
).encode


def fast_domain(value: Any) -> bool:
    """True when the standard encoder's output is proven to be the RFC 8785 bytes of ``value``."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if -MAX_SAFE_INT <= item <= MAX_SAFE_INT:
                continue
            return False
        if kind is dict:
            for key in item:
                if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                    return False
            extend(item.values())
            continue
        if kind is list or kind is tuple:
            extend(item)
            continue
        if isinstance(item, str):  # StrEnum members: both encoders write the text
            continue
        return False
    return True


def reference_json(value: Any) -> bytes:
    """RFC 8785 bytes by the reference implementation (slow; every value)."""
    return rfc8785.dumps(value)


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical bytes of a JSON-ready value."""
    if fast_domain(value):
        try:
            return _encode(value).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the reference raises its own error
            pass
    return rfc8785.dumps(value)
