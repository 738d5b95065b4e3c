"""A content schema's answer: every failing field of the content, by JSON pointer,
in words that never repeat the content (I10)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.executors.content_schema import load_content_schema
from domain.problems import MAX_PROBLEMS, FieldProblem, from_pydantic, summary

CANARY = "zqxcanary5521"
TASK: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 20},
        "priority": {"enum": ["low", "high"]},
        "count": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "api_token_hint": {"type": "string"},
        "due": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]},
    },
    "required": ["title", "priority"],
    "additionalProperties": False,
}


def problems(content: dict[str, Any], schema: dict[str, Any] = TASK) -> list[FieldProblem]:
    return load_content_schema(schema, "content_schema").problems(content, "/spec/content")


def test_valid_content_has_no_problems() -> None:
    assert problems({"title": "Buy milk", "priority": "low", "tags": ["a"]}) == []


def test_every_failing_field_is_listed_by_pointer() -> None:
    found = problems(
        {
            "title": 7,
            "count": 0,
            "tags": ["a", 2, "c"],
            "due": {},
            "colour": "blue",
        }
    )
    by_pointer = {p.pointer: p.message for p in found}
    assert by_pointer == {
        "/spec/content/title": "must be a string",
        "/spec/content/priority": "is required",
        "/spec/content/count": "must be at least 1",
        "/spec/content/tags": "must have at most 2 items",
        "/spec/content/tags/1": "must be a string",
        "/spec/content/due/day": "is required",
        "/spec/content/colour": "unknown field /spec/content/colour is not permitted",
    }
    assert all(p.location == "body" for p in found)


def test_messages_say_what_the_schema_wants_never_what_was_sent() -> None:
    found = problems({"title": CANARY * 3, "priority": f"urgent {CANARY}"})
    assert {p.pointer for p in found} == {"/spec/content/title", "/spec/content/priority"}
    assert 'must be one of "low", "high"' in [p.message for p in found]
    assert "must be at most 20 characters long" in [p.message for p in found]
    assert CANARY not in repr(found)


def test_a_callers_secret_shaped_key_is_masked_but_a_declared_one_is_named() -> None:
    found = problems({"title": "t", "priority": "low", f"sk_live_{CANARY}": 1, "api_token_hint": 5})
    pointers = {p.pointer for p in found}
    assert pointers == {"/spec/content/*", "/spec/content/api_token_hint"}
    assert CANARY not in repr(found)


def test_the_whole_content_can_fail() -> None:
    found = problems({}, {"type": "object", "minProperties": 1})
    assert found == [FieldProblem("/spec/content", "must have at least 1 fields")]


def test_a_reference_loop_reached_only_by_some_content_is_a_problem_not_a_crash() -> None:
    schema = {
        "properties": {"loop": {"$ref": "#/$defs/loop"}},
        "$defs": {"loop": {"$ref": "#/$defs/loop"}},
    }
    found = problems({"loop": 1}, schema)
    assert found == [
        FieldProblem("/spec/content", "could not be checked against the build's schema")
    ]


@pytest.mark.parametrize(
    ("schema", "content", "message"),
    [
        ({"const": "x"}, 1, 'must be "x"'),
        ({"type": ["string", "null"]}, 1, "must be a string or null"),
        ({"pattern": "^[a-z]+$"}, "A", 'must match the pattern "^[a-z]+$"'),
        ({"exclusiveMaximum": 3}, 3, "must be less than 3"),
        ({"multipleOf": 5}, 7, "must be a multiple of 5"),
        ({"uniqueItems": True}, [1, 1], "must not hold the same item twice"),
        ({"anyOf": [{"type": "string"}, {"type": "array"}]}, 1, "must match at least one"),
        ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 1, "must match exactly one"),
        ({"not": {"type": "integer"}}, 1, "must not match the schema's `not` subschema"),
        (False, 1, "is not allowed by the schema"),
    ],
)
def test_each_keyword_has_words(schema: Any, content: Any, message: str) -> None:
    found = problems({"v": content}, {"properties": {"v": schema}})
    assert len(found) == 1 and found[0].pointer == "/spec/content/v"
    assert found[0].message.startswith(message), found[0].message


def test_a_dependent_requirement_names_the_missing_field() -> None:
    schema = {"dependentRequired": {"due": ["timezone"]}}
    assert problems({"due": "x"}, schema) == [
        FieldProblem("/spec/content/timezone", "is required when due is present")
    ]


def test_format_is_an_annotation_not_a_check() -> None:
    assert problems({"at": "not a date"}, {"properties": {"at": {"format": "date-time"}}}) == []


def test_the_digest_is_of_the_canonical_schema() -> None:
    a = load_content_schema({"type": "object", "required": ["a"]}, "x")
    b = load_content_schema({"required": ["a"], "type": "object"}, "x")
    c = load_content_schema({"type": "object", "required": ["b"]}, "x")
    assert a.digest == b.digest != c.digest


def test_more_problems_than_listed_are_counted() -> None:
    schema = {"additionalProperties": {"type": "string"}}
    found = problems({f"k{n}": n for n in range(MAX_PROBLEMS + 12)}, schema)
    assert len(found) == MAX_PROBLEMS + 12
    text = summary(found, "")
    assert text.count("must be a string") == MAX_PROBLEMS
    assert text.endswith(f"12 more not listed ({MAX_PROBLEMS + 12} problems in all)")


def test_pydantic_locations_become_pointers_and_parameters() -> None:
    errors = [
        {"type": "missing", "loc": ("body", "spec", "capability"), "msg": "Field required"},
        {"type": "extra_forbidden", "loc": ("body", "spec", "target", "colour"), "msg": "x"},
        {"type": "int_parsing", "loc": ("query", "limit"), "msg": "Input should be an integer"},
        {
            "type": "literal_error",
            "loc": ("query", "status", "literal['queued']"),
            "msg": "Input should be 'queued'",
        },
        {"type": "string_type", "loc": ("body", "sources", 2), "msg": "Input should be a string"},
    ]
    assert [(p.pointer, p.location, p.message) for p in from_pydantic(errors)] == [
        ("/spec/capability", "body", "is required"),
        ("/spec/target/colour", "body", "unknown field /spec/target/colour is not permitted"),
        ("/limit", "query", "Input should be an integer"),
        ("/status", "query", "Input should be 'queued'"),
        ("/sources/2", "body", "Input should be a string"),
    ]
    assert summary(from_pydantic(errors[:3]), "") == (
        "/spec/capability: is required; unknown field /spec/target/colour is not permitted; "
        "query parameter limit: Input should be an integer"
    )
