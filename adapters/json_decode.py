"""Decoding stored JSON: ``orjson`` where it is installed and its answer is
the standard library's, else the standard ``json``.

:func:`loads` is the standard decoder on the UTF-8 text
(``json.JSONDecoder().decode(data.decode("utf-8"))``, which is ``json.loads``
but for the message of a byte order mark), value for value and error for
error. ``orjson`` (a C decoder, about twice as fast on an event's bytes)
decodes first when it is installed; where it answers differently from the
standard decoder it is not used:

- it refuses what the standard decoder accepts and JSON does not (``NaN``,
  ``Infinity``, an escaped lone surrogate such as ``"\\ud800"``, a number too
  large for a double): a refusal falls back to the standard decoder, whose
  value or error is then the answer;
- it decodes an integer outside 64 bits as a float where the standard decoder
  keeps the integer: such a literal has at least 19 digits in a row, so bytes
  with a run of 19 digits anywhere (a number, or inside a string: harmless,
  only slower) go to the standard decoder without trying ``orjson``.

Every other JSON text decodes to the same value either way (the same
containers, strings, integers and correctly rounded floats; the last of a
duplicated key wins in both), which ``tests/unit/test_json_decode.py`` checks
with a property test on the shapes of the events the ledger stores and on
arbitrary JSON, and by explicit edge cases. Without ``orjson`` (a platform it
has no wheel for) every decode is the standard one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - orjson has wheels for the supported platforms
    orjson = None  # type: ignore[assignment]

_standard = json.JSONDecoder().decode
_DIGIT_RUN = b"9" * 19
"""An integer orjson cannot hold exactly is at least this many digits long."""
_DIGITS_TO_9 = bytes(0x39 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
"""Every digit as ``9``, every other byte as a space: a run of digits becomes a run of 9s."""


def standard_loads(data: bytes) -> Any:
    """The standard library's decode of UTF-8 bytes (the reference)."""
    return _standard(data.decode("utf-8"))


def _orjson_loads(data: bytes) -> Any:
    if _DIGIT_RUN not in data.translate(_DIGITS_TO_9):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # the standard decoder gives the answer: a value or its error
    return _standard(data.decode("utf-8"))


loads: Callable[[bytes], Any] = standard_loads if orjson is None else _orjson_loads
"""The standard decoder on the UTF-8 text, through ``orjson`` where that is the same."""

FAST = orjson is not None
"""Whether :func:`loads` goes through ``orjson``."""
