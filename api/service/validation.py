"""Request schemas for callers without HTTP: a request that fails its schema is
``InvalidInput`` with the same safe description the HTTP API gives (field
locations and what was expected, never what was sent: I10)."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from domain.errors import InvalidInput

MAX_REPORTED_PROBLEMS = 5

_SAFE_LOCATION = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")
M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], data: Any) -> M:
    """``data`` validated as ``model``; InvalidInput (the HTTP API's 422) otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(describe_request_errors(list(exc.errors()))) from None


def describe_request_errors(errors: list[Any]) -> str:
    """Field locations and messages of a validation failure, never input values."""
    parts: list[str] = []
    for err in errors[:MAX_REPORTED_PROBLEMS]:
        loc = [
            str(p) if isinstance(p, int) or _SAFE_LOCATION.match(str(p)) else "*"
            for p in err.get("loc", ())
        ]
        kind = err.get("type", "")
        message = str(err.get("msg", "invalid value"))
        if kind == "extra_forbidden":
            # The offending key is request content: name its parent, not the key.
            loc, message = loc[:-1], "unknown field is not permitted"
        elif kind == "json_invalid":
            reason = str((err.get("ctx") or {}).get("error", "")).strip()
            loc = loc[:1]
            message = f"JSON decode error ({reason})" if reason else "JSON decode error"
        elif kind in {"model_attributes_type", "dict_type"} and len(loc) == 1:
            message = "expected a JSON object sent as application/json"
        else:
            sent = err.get("input")
            if isinstance(sent, str) and len(sent) >= 3 and sent in message:
                message = "invalid value"
        parts.append(f"{'.'.join(loc) or 'body'}: {message}")
    if len(errors) > MAX_REPORTED_PROBLEMS:
        parts.append(f"and {len(errors) - MAX_REPORTED_PROBLEMS} more")
    return "; ".join(parts) or "The request is not valid."
