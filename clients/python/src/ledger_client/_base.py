"""What every typed request and answer shares, mirroring the server's schemas.

Each class carries the name of the schema it mirrors in the server's OpenAPI
document (``SCHEMA``); a test compares their field names, so a field added on
one side and not the other fails the build. Answers ignore keys they do not
know (a newer server may add some); requests send only what is set, and an
optional field left ``None`` is omitted, never sent as ``null``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar, Union

T = TypeVar("T")

SETTLED_STATUSES = frozenset(
    {"succeeded", "failed_safe", "outcome_unknown", "manually_resolved", "effect_after_no_effect"}
)
"""Where a wait ends: a terminal status, or ``outcome_unknown`` (waiting for a human)."""


class Model:
    """What every mirrored schema shares: its name, JSON in and out."""

    SCHEMA: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        """The JSON body: nested models as objects, ``None`` fields left out."""
        return {
            f.name: _to_json(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if getattr(self, f.name) is not None
        }


def _to_json(value: Any) -> Any:
    if isinstance(value, Model):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [_to_json(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _to_json(item) for key, item in value.items()}
    return value


class DecodeError(ValueError):
    """An answer does not have the shape of the schema it should follow."""


def decode(cls: type[T], data: Any) -> T:
    """Build ``cls`` (a model of this module) from a JSON answer."""
    return typing.cast(T, _decode(cls, data, cls.__name__))


def _decode(kind: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(kind) if a is not type(None)]
        if data is None:
            return None
        return _decode(options[0], data, where)
    if origin is list:
        if not isinstance(data, list):
            raise DecodeError(f"{where}: expected a list")
        (item,) = typing.get_args(kind)
        return [_decode(item, value, f"{where}[{i}]") for i, value in enumerate(data)]
    if isinstance(kind, type) and issubclass(kind, Model):
        if not isinstance(data, Mapping):
            raise DecodeError(f"{where}: expected an object")
        hints = typing.get_type_hints(kind)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(kind):  # type: ignore[arg-type]
            if f.name in data:
                values[f.name] = _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DecodeError(f"{where}: missing {f.name}")
        return kind(**values)
    if kind in (str, int, bool) and not isinstance(data, kind):
        raise DecodeError(f"{where}: expected {kind.__name__}")
    return data
