"""Content schemas of executor builds (design.md 2.1 and 11.1).

A build may declare a JSON Schema for the spec's ``content``: an ``[[http]]``
entry with ``content_schema = {...}`` or ``content_schema_file = "..."``, a
plugin's executor with a ``content_schema`` attribute, each fake its own. It
is checked once, at start-up, and every propose validates the content against
it (``jsonschema``'s Draft 2020-12 validator):

- format assertions are off (``format`` is an annotation, the draft's default);
- references are local only (``$ref`` and ``$dynamicRef`` start with ``#``,
  ``$id`` only at the top): the ledger never fetches a schema;
- bounded: at most ``MAX_SCHEMA_BYTES`` canonical and ``MAX_SCHEMA_DEPTH``
  levels, JSON values only (no TOML dates, no NaN, integers within
  +-(2^53-1)), ``$schema`` absent or Draft 2020-12's;
- a schema that breaks any of that, or is not a valid schema, stops start-up
  with one line naming where it came from and what is wrong.

The canonical schema is part of the build: its RFC 8785 bytes give the
build's ``schema_digest`` (``domain.spec.content_schema_digest``), and the
``http`` executor puts the schema in its build digest, so a schema change is a
new build. The messages about content name the failing keyword and what the
schema wants (the schema is published by ``GET /executors``), never the
content (I10).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator, SchemaError, ValidationError
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from domain.canonical import canonical_json
from domain.problems import FieldProblem, safe_segment
from domain.spec import MAX_SAFE_INT, content_schema_digest

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_FILE_BYTES = 256 * 1024
MAX_CONTENT_ERRORS = 1000
"""Validation stops after this many errors (the 422 lists at most 50 of them)."""

DRAFT = "https://json-schema.org/draft/2020-12/schema"
_BASE_URI = "urn:execution-ledger:content-schema"
_EMPTY_REGISTRY: Registry[Any] = Registry()
# Keywords whose values are data, not subschemas: never searched for references.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "object": "an object",
    "array": "an array",
    "boolean": "a boolean",
    "null": "null",
}


class ContentSchemaError(ValueError):
    """A content schema that cannot be used; the message names the key, not content."""


@dataclass(frozen=True)
class LoadedContentSchema:
    """A checked content schema: its canonical form, its digest and its validator.

    Implements ``domain.ports.ContentSchema``."""

    schema: Mapping[str, Any]
    digest: str
    _validator: Draft202012Validator = field(repr=False, compare=False)
    _declared: frozenset[str] = field(repr=False, compare=False)

    def problems(self, content: Mapping[str, Any], prefix: str) -> list[FieldProblem]:
        """Every way ``content`` fails the schema, as pointers under ``prefix``."""
        found: list[FieldProblem] = []
        seen: set[tuple[str, str]] = set()
        try:
            for count, error in enumerate(self._validator.iter_errors(content)):
                if count >= MAX_CONTENT_ERRORS:
                    break
                for problem in self._explain(error, prefix):
                    if (problem.pointer, problem.message) not in seen:
                        seen.add((problem.pointer, problem.message))
                        found.append(problem)
        except (RecursionError, Unresolvable):
            return [FieldProblem(prefix, "could not be checked against the build's schema")]
        return found

    def _where(self, segments: Any, prefix: str) -> str:
        # A key the schema names is the schema's (public); any other is the caller's.
        return prefix + "".join("/" + self._segment(s) for s in segments)

    def _segment(self, segment: object) -> str:
        if isinstance(segment, str) and segment in self._declared:
            return segment.replace("~", "~0").replace("/", "~1")
        return safe_segment(segment)

    def _explain(self, error: ValidationError, prefix: str) -> Iterator[FieldProblem]:
        at = self._where(error.absolute_path, prefix)
        keyword, wanted, instance = error.validator, error.validator_value, error.instance
        if keyword == "required" and isinstance(instance, Mapping):
            for name in wanted:
                if name not in instance:
                    yield FieldProblem(f"{at}/{self._segment(name)}", "is required")
        elif keyword == "dependentRequired" and isinstance(instance, Mapping):
            for name, needs in wanted.items():
                if name in instance:
                    for need in needs:
                        if need not in instance:
                            yield FieldProblem(
                                f"{at}/{self._segment(need)}",
                                f"is required when {self._segment(name)} is present",
                            )
        elif keyword == "additionalProperties" and isinstance(instance, Mapping):
            known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            patterns = (
                error.schema.get("patternProperties", {}) if isinstance(error.schema, dict) else {}
            )
            for name in instance:
                if name in known or _matches_any(patterns, name):
                    continue
                where = f"{at}/{self._segment(name)}"
                yield FieldProblem(where, f"unknown field {where} is not permitted")
        else:
            yield FieldProblem(at, _message(keyword, wanted))


def _matches_any(patterns: Mapping[str, Any], name: str) -> bool:
    return any(re.search(pattern, name) for pattern in patterns)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."


def _message(keyword: Any, wanted: Any) -> str:
    """What the schema's ``keyword`` wants, in words (never the failing value)."""
    if keyword == "type":
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        return "must be " + " or ".join(_TYPE_NAMES.get(str(n), str(n)) for n in names)
    simple: dict[str, Callable[[Any], str]] = {
        "enum": lambda v: "must be one of " + ", ".join(_shown(x) for x in v),
        "const": lambda v: f"must be {_shown(v)}",
        "minLength": lambda v: f"must be at least {v} characters long",
        "maxLength": lambda v: f"must be at most {v} characters long",
        "pattern": lambda v: f"must match the pattern {_shown(v)}",
        "minimum": lambda v: f"must be at least {v}",
        "maximum": lambda v: f"must be at most {v}",
        "exclusiveMinimum": lambda v: f"must be more than {v}",
        "exclusiveMaximum": lambda v: f"must be less than {v}",
        "multipleOf": lambda v: f"must be a multiple of {v}",
        "minItems": lambda v: f"must have at least {v} items",
        "maxItems": lambda v: f"must have at most {v} items",
        "uniqueItems": lambda v: "must not hold the same item twice",
        "minProperties": lambda v: f"must have at least {v} fields",
        "maxProperties": lambda v: f"must have at most {v} fields",
        "minContains": lambda v: f"must hold at least {v} items that match `contains`",
        "maxContains": lambda v: f"must hold at most {v} items that match `contains`",
        "contains": lambda v: "must hold an item that matches `contains`",
        "anyOf": lambda v: "must match at least one of the schema's `anyOf` alternatives",
        "oneOf": lambda v: "must match exactly one of the schema's `oneOf` alternatives",
        "not": lambda v: (
            "is not allowed by the schema"
            if v == {}
            else "must not match the schema's `not` subschema"
        ),
        "propertyNames": lambda v: "has a field name the schema does not allow",
        "unevaluatedProperties": lambda v: "has fields the schema does not allow",
        "unevaluatedItems": lambda v: "has items the schema does not allow",
        "items": lambda v: "has more items than the schema allows",
    }
    if keyword in simple:
        return simple[keyword](wanted)
    if keyword is None:  # a `false` subschema
        return "is not allowed by the schema"
    return f"fails the schema's `{keyword}` rule"


def load_content_schema(value: Any, where: str) -> LoadedContentSchema:
    """Check a declared schema and build its validator; ``ContentSchemaError``
    (naming ``where``) when it cannot be used."""
    if not isinstance(value, Mapping):
        raise ContentSchemaError(f"{where}: must be a JSON Schema object")
    _check_json(value, where)
    try:
        text = canonical_json(dict(value))
    except (TypeError, ValueError) as exc:
        raise ContentSchemaError(f"{where}: not JSON ({exc})") from None
    if len(text) > MAX_SCHEMA_BYTES:
        raise ContentSchemaError(f"{where}: larger than {MAX_SCHEMA_BYTES} bytes canonical")
    schema: dict[str, Any] = json.loads(text)
    declared = schema.get("$schema")
    if declared is not None and str(declared).rstrip("#") != DRAFT:
        raise ContentSchemaError(
            f"{where}: $schema must be {DRAFT} (the only draft the ledger validates with)"
        )
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        path = "/" + "/".join(str(p) for p in exc.absolute_path)
        raise ContentSchemaError(
            f"{where}: not a valid JSON Schema (Draft 2020-12) at {path}: {_short(exc.message)}"
        ) from None
    names = _check_references(schema, where)
    validator = Draft202012Validator(_validating_form(schema), registry=_EMPTY_REGISTRY)
    try:
        list(validator.iter_errors({}))
    except RecursionError:
        raise ContentSchemaError(f"{where}: a $ref refers to itself without end") from None
    return LoadedContentSchema(schema, content_schema_digest(schema), validator, names)


_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
_SCHEMA_VALUES = frozenset(
    {
        "items",
        "contains",
        "additionalProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
    }
)
_NOTHING: dict[str, Any] = {"not": {}}


def _validating_form(schema: Any, slot: bool = False) -> Any:
    """The schema the validator runs: a ``false`` subschema of a field (under
    ``properties``, ``$defs``, ``allOf``...) as ``{"not": {}}``, which allows
    exactly as little, because the validator reports such a ``false`` without
    the field's path. Keywords that report their own ``false`` at the object
    (``additionalProperties``, ``items``...) keep it. (The listed and hashed
    schema stays as written.)"""
    if schema is False and slot:
        return _NOTHING
    if not isinstance(schema, dict):
        return schema
    form: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            form[key] = {name: _validating_form(sub, True) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            form[key] = [_validating_form(sub, True) for sub in value]
        elif key in _SCHEMA_VALUES:
            form[key] = _validating_form(value)
        else:
            form[key] = value
    return form


def load_content_schema_file(path: Any, where: str) -> Any:
    """The JSON document of a ``content_schema_file`` (bounded), for :func:`load_content_schema`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ContentSchemaError(f"{where}: cannot read ({exc.strerror or 'error'})") from None
    if len(data) > MAX_SCHEMA_FILE_BYTES:
        raise ContentSchemaError(f"{where}: larger than {MAX_SCHEMA_FILE_BYTES} bytes")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise ContentSchemaError(f"{where}: not UTF-8 text") from None
    except RecursionError:
        raise ContentSchemaError(f"{where}: nested more than {MAX_SCHEMA_DEPTH} levels") from None
    except ValueError as exc:
        raise ContentSchemaError(f"{where}: not valid JSON ({_short(str(exc))})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."


def _check_json(value: Any, where: str) -> None:
    """JSON values only, at most ``MAX_SCHEMA_DEPTH`` deep (walked without recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise ContentSchemaError(f"{where}: nested more than {MAX_SCHEMA_DEPTH} levels")
        if isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise ContentSchemaError(f"{where}: keys must be strings")
                pending.append((child, depth + 1))
        elif isinstance(item, list | tuple):
            pending.extend((child, depth + 1) for child in item)
        elif isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        elif isinstance(item, int):
            if not -MAX_SAFE_INT <= item <= MAX_SAFE_INT:
                raise ContentSchemaError(f"{where}: integers must be within +-(2^53-1)")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ContentSchemaError(f"{where}: numbers must be finite (no nan or inf)")
        else:
            raise ContentSchemaError(
                f"{where}: values must be JSON (not {type(item).__name__}; a TOML date "
                "or time is not JSON)"
            )


def _check_references(schema: dict[str, Any], where: str) -> frozenset[str]:
    """Refuse non-local references and a nested ``$id``; resolve every local
    ``$ref``; return every field name the schema declares."""
    resource: Resource[Any] = Resource.from_contents(schema, default_specification=DRAFT202012)
    uri = resource.id() or _BASE_URI
    resolver = Registry().with_resource(uri, resource).resolver(base_uri=uri)
    names: set[str] = set()
    pending: list[tuple[Any, bool]] = [(schema, True)]
    while pending:
        item, top = pending.pop()
        if isinstance(item, list):
            pending.extend((child, False) for child in item)
            continue
        if not isinstance(item, dict):
            continue
        if "$id" in item and not top:
            raise ContentSchemaError(f"{where}: $id is allowed only at the top of the schema")
        for keyword in ("$ref", "$dynamicRef"):
            ref = item.get(keyword)
            if isinstance(ref, str):
                if not ref.startswith("#"):
                    raise ContentSchemaError(
                        f"{where}: {keyword} {_shown(ref)} is not local (it must start "
                        "with #: the ledger never fetches a schema)"
                    )
                try:
                    resolver.lookup(ref)
                except Unresolvable:
                    raise ContentSchemaError(
                        f"{where}: {keyword} {_shown(ref)} names nothing in the schema"
                    ) from None
        for keyword in ("properties", "dependentRequired", "dependentSchemas"):
            block = item.get(keyword)
            if isinstance(block, dict):
                names.update(block)
        for keyword in ("required",):
            block = item.get(keyword)
            if isinstance(block, list):
                names.update(n for n in block if isinstance(n, str))
        pending.extend((v, False) for k, v in item.items() if k not in _DATA_KEYWORDS)
    return frozenset(names)
