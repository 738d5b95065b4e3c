"""Field problems: what a 422 lists, one entry per failing field (design.md 4.1).

A problem names WHERE a request is wrong as a JSON pointer (RFC 6901) into
the request body, ``/spec/content/title``, and WHAT is wrong in words that
never repeat what was sent (I10): the messages say what was expected. A key
of the caller's is named in a pointer only when it is a plain name that does
not look like a secret; any other key (a canary, a credential pasted into a
field name, a control character) is shown as ``*``.

Every entry point reports the same problems: the HTTP API in the ``errors``
of its error body, the in-process API on ``InvalidInput.problems``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from domain.redaction import looks_secret, secret_shaped_key

MAX_PROBLEMS = 50
"""At most this many problems are listed; ``error_count`` says how many were found."""

BODY = "body"
LOCATIONS = frozenset({BODY, "query", "path", "header"})
MASK = "*"

_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
# pydantic puts the member of a union or a wrapped validator in a location as a
# tag ("function-after[...]", "literal['a']"): no part of the request's shape
_VALIDATOR_TAG = re.compile(r"^[a-z][a-z-]*\[.*\]$", re.S)


@dataclass(frozen=True)
class FieldProblem:
    """One failing field: a JSON pointer into the body (or the name of a query,
    path or header parameter, with ``location`` saying which) and what it needs."""

    pointer: str
    message: str
    location: str = BODY

    def describe(self) -> str:
        """One line of an error's ``detail``."""
        if self.pointer and self.pointer in self.message:
            return self.message  # it names its field already ("unknown field /spec/foo ...")
        if self.location == BODY:
            return f"{self.pointer or 'body'}: {self.message}"
        kind = f"{self.location} parameter" if self.location in LOCATIONS else self.location
        return f"{kind} {self.pointer.lstrip('/') or '?'}: {self.message}"


def safe_segment(segment: object) -> str:
    """A pointer segment as shown: an index, a plain name, or ``*``."""
    if isinstance(segment, int) and not isinstance(segment, bool):
        return str(segment)
    text = str(segment)
    if not _PLAIN_NAME.match(text) or secret_shaped_key(text) or looks_secret(text):
        return MASK
    return text.replace("~", "~0").replace("/", "~1")


def pointer(segments: Iterable[object], prefix: str = "") -> str:
    """``prefix`` followed by the RFC 6901 pointer of ``segments`` (each made safe)."""
    return prefix + "".join("/" + safe_segment(s) for s in segments)


def unknown_field(segments: Sequence[object], prefix: str = "", location: str = BODY) -> str:
    """The message of an unknown field, naming it: ``unknown field /spec/foo is not permitted``."""
    where = pointer(segments, prefix)
    if location != BODY:
        return f"unknown {location} parameter {where.lstrip('/')} is not permitted"
    return f"unknown field {where} is not permitted"


def _without_input(message: str, sent: Any) -> str:
    # pydantic quotes some inputs in its messages ("Input should be ... got 'x'")
    if isinstance(sent, str) and len(sent) >= 3 and sent in message:
        return "invalid value"
    return message


def from_pydantic(errors: Iterable[Mapping[str, Any]], prefix: str = "") -> list[FieldProblem]:
    """The problems of a pydantic (or FastAPI request) validation failure.

    A location that starts with ``body``, ``query``, ``path`` or ``header`` (a
    FastAPI request) is placed there; any other is a body pointer under
    ``prefix``. Messages never carry the input."""
    found: list[FieldProblem] = []
    for err in errors:
        loc = [
            p for p in err.get("loc", ()) if not (isinstance(p, str) and _VALIDATOR_TAG.match(p))
        ]
        location = BODY
        if loc and loc[0] in LOCATIONS:
            location = str(loc.pop(0))
            if location != BODY:
                loc = loc[:1]  # a parameter is named; what is inside its value is not a field
        kind = str(err.get("type", ""))
        message = str(err.get("msg", "invalid value"))
        if kind == "extra_forbidden":
            message = unknown_field(loc, prefix, location)
        elif kind == "json_invalid":
            reason = str((err.get("ctx") or {}).get("error", "")).strip()
            loc = []
            message = f"JSON decode error ({reason})" if reason else "JSON decode error"
        elif kind in {"model_attributes_type", "dict_type"} and not loc and location == BODY:
            message = "expected a JSON object sent as application/json"
        elif kind == "missing":
            message = "is required"
        else:
            message = _without_input(message, err.get("input"))
        found.append(
            FieldProblem(pointer(loc, prefix if location == BODY else ""), message, location)
        )
    return found


def summary(problems: Sequence[FieldProblem], fallback: str) -> str:
    """The ``detail`` of an error that lists ``problems``: every listed one, then
    how many more were found when there were more than ``MAX_PROBLEMS``."""
    listed = [p.describe() for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        listed.append(
            f"{len(problems) - MAX_PROBLEMS} more not listed ({len(problems)} problems in all)"
        )
    return "; ".join(listed) or fallback
