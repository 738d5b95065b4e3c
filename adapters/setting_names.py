"""Misspelled ``LEDGER_*`` variables: a warning naming the nearest setting.

A variable that is no setting but is named like one is most likely a typo
that would be ignored; every command (and each Lambda function) reports it
when it starts, as a warning, never a failure (design.md 9).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

ENV_PREFIX = "LEDGER_"
# How close a misspelled variable's name must be to a setting's to be reported.
NEAREST_NAME_CUTOFF = 0.75
# The secrets an executors file names as "env:NAME" are its own, not settings.
_ENV_REFERENCE = re.compile(r"env:([A-Za-z_][A-Za-z0-9_]{0,127})")


def setting_variables() -> frozenset[str]:
    """Every ``LEDGER_*`` variable the settings read."""
    return frozenset(ENV_PREFIX + name.upper() for name in _fields())


def unknown_variables(
    environ: Mapping[str, str], *, referenced: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """``(variable, nearest setting)`` for each ``LEDGER_*`` variable that is no
    setting but is named like one, so most likely a typo that would be ignored.

    Named like one: after the prefix, difflib's ratio to a setting's name is at
    least ``NEAREST_NAME_CUTOFF``, or one name contains the other
    (``LEDGER_ENVIRONMENT`` for ``LEDGER_ENV``). Any other ``LEDGER_*`` name is
    left alone (other tools use the prefix too), and so are the secrets an
    executors file names (``referenced``).
    """
    candidates = [name for name in sorted(environ) if name.upper().startswith(ENV_PREFIX)]
    if not candidates:
        return []  # the settings' names are not even needed (``ledger --help``)
    known = {name.removeprefix(ENV_PREFIX): name for name in setting_variables()}
    found: list[tuple[str, str]] = []
    for name in candidates:
        upper = name.upper()
        if upper in known.values() or name in referenced:
            continue
        nearest = _nearest(upper.removeprefix(ENV_PREFIX), known)
        if nearest:
            found.append((name, nearest))
    return found


def _nearest(suffix: str, known: Mapping[str, str]) -> str | None:
    close = difflib.get_close_matches(suffix, list(known), n=1, cutoff=NEAREST_NAME_CUTOFF)
    if close:
        return known[close[0]]
    containing = [
        k for k in known if len(suffix) >= 3 and len(k) >= 3 and (k in suffix or suffix in k)
    ]
    if not containing:
        return None
    best = max(containing, key=lambda k: difflib.SequenceMatcher(None, suffix, k).ratio())
    return known[best]


def referenced_variables(executors_file: str | None) -> frozenset[str]:
    """The variables an executors file names as ``env:NAME`` (none when it cannot be read)."""
    if not executors_file:
        return frozenset()
    from pathlib import Path

    try:
        text = Path(executors_file).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    return frozenset(_ENV_REFERENCE.findall(text))


def unknown_variable_warnings(environ: Mapping[str, str]) -> list[str]:
    """One line per misspelled ``LEDGER_*`` variable, naming the nearest setting."""
    referenced = referenced_variables(environ.get(ENV_PREFIX + "EXECUTORS_FILE"))
    return [
        f"warning: {name} is not a setting and is ignored; did you mean {nearest}?"
        for name, nearest in unknown_variables(environ, referenced=referenced)
    ]


def _fields() -> list[str]:
    from adapters.settings import Settings

    return list(Settings.model_fields)
