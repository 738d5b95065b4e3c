"""Hypothesis strategies for the values an adversarial pass throws at the API.

Timestamps at the edges of the calendar with odd offsets, and strings holding
what a log line, a preview or an encoder chokes on: lone surrogates, bidi and
zero-width characters, C0/C1 controls, private-use and unassigned code points.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import strategies as st

# Every character that must never be part of an id.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u180e"
CONTROLS = "".join(map(chr, range(0x20))) + "\x7f" + "".join(map(chr, range(0x80, 0xA0)))
SEPARATORS = "\u2028\u2029"
SURROGATES = "\ud800\udbff\udc00\udfff"
ODD = "\ue000\uf8ff\U000e0080\U0010fffe"  # private use, unassigned, noncharacter
HIDDEN = BIDI + ZERO_WIDTH + CONTROLS + SEPARATORS + SURROGATES + ODD

hidden_chars = st.sampled_from(HIDDEN)
"""One character no id may contain."""

plain_text = st.text(
    st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")), min_size=1, max_size=40
)
"""Ordinary printable text in any script."""


@st.composite
def hostile_text(draw: st.DrawFn, base: st.SearchStrategy[str] = plain_text) -> str:
    """Ordinary text with one to three hidden characters spliced in anywhere."""
    text = draw(base)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(hidden_chars) + text[at:]
    return text


hostile_ids = st.one_of(
    hostile_text(),
    hostile_text(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,20}", fullmatch=True)),
    st.text(min_size=257, max_size=300),
    st.just(""),
)
"""Strings that no id field, claim or path segment may accept."""

any_text = st.one_of(plain_text, hostile_text(), st.text(max_size=40))
"""Anything: most of it must be refused, some accepted; none may be a 5xx."""


# Offsets a timestamp may carry: whole and odd minutes up to +-23:59, Z, none.
def _offset(signs: str) -> st.SearchStrategy[str]:
    return st.builds(
        lambda sign, h, m: f"{sign}{h:02d}:{m:02d}",
        st.sampled_from(signs),
        st.integers(0, 23),
        st.integers(0, 59),
    )


offsets = st.one_of(st.just("Z"), st.just(""), _offset("+-"))

LAST = datetime(9999, 12, 31, 23, 59, 59, 999999)
FIRST = datetime(1, 1, 1)

extreme_moments = st.one_of(
    st.sampled_from([FIRST, LAST, LAST.replace(microsecond=0)]),
    st.datetimes(min_value=FIRST, max_value=datetime(1, 1, 2, 23, 59)),
    st.datetimes(min_value=datetime(9999, 12, 30), max_value=LAST),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
)


def _text(moment: datetime, offset: str, trim: bool) -> str:
    text = moment.isoformat()
    return (text.rstrip("0") if trim and moment.microsecond else text) + offset


odd_timestamps_general = st.builds(_text, extreme_moments, offsets, st.booleans())
"""RFC 3339 text near the ends of the calendar (or not) with any offset and precision."""

# The calendar's edges with the offset that pushes them past it in UTC.
calendar_overflows = st.one_of(
    st.builds(
        _text,
        st.datetimes(min_value=datetime(9999, 12, 31, 23), max_value=LAST),
        _offset("-").filter(lambda o: o != "-00:00"),
        st.booleans(),
    ),
    st.builds(
        _text,
        st.datetimes(min_value=FIRST, max_value=datetime(1, 1, 1, 0, 59)),
        _offset("+").filter(lambda o: o != "+00:00"),
        st.booleans(),
    ),
)


def odd_timestamps() -> st.SearchStrategy[str]:
    """Odd timestamps, a third of them just past the calendar once in UTC."""
    return st.one_of(calendar_overflows, odd_timestamps_general, odd_timestamps_general)


def fits_in_utc(text: str) -> bool:
    """The oracle: does this timestamp name an instant the calendar can hold in UTC?"""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        return False
    offset = moment.utcoffset() or timedelta(0)
    naive = moment.replace(tzinfo=None)
    try:
        naive - offset
    except OverflowError:
        return False
    return True
