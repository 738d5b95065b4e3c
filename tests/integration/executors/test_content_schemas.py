"""Content schemas in the executors file and in plugins: checked at start-up (one
line naming the file, the entry and the key), part of the build digest, and
listed with their digest; a schema change is a new build."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.executors.loader import ExecutorConfigError, load_executors
from adapters.executors.registry import NO_SCHEMA_DIGEST
from adapters.settings import load_settings
from domain.canonical import canonical_json
from domain.directory import DeliveryMode
from domain.spec import content_schema_digest, sha256_tag
from tests.support.http_executors import load_http

HEAD = (
    '[[http]]\ncapability = "tasks.create"\ndelivery_mode = "provider_idempotency"\n'
    'url = "https://tasks.example/v1/{destination}"\n'
)
TASK = {
    "type": "object",
    "properties": {"title": {"type": "string", "maxLength": 200}, "due": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}
INLINE = (
    HEAD + 'content_schema = { type = "object", properties = { title = { type = "string", '
    'maxLength = 200 }, due = { type = "string" } }, required = ["title"], '
    "additionalProperties = false }\n"
)


def loaded(tmp_path: Path, text: str) -> list[Any]:
    result = load_http(tmp_path, text, "unused", environ={})
    try:
        return result.registry.entries()
    finally:
        result.registry.close()


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(ExecutorConfigError) as caught:
        load_http(tmp_path, text, "unused", environ={})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("LEDGER_EXECUTORS_FILE executors.toml: [[http]] #1 (tasks.create): ")
    return message


def test_an_inline_schema_is_listed_with_its_digest(tmp_path: Path) -> None:
    (entry,) = loaded(tmp_path, INLINE)
    assert entry.content_schema == TASK
    assert entry.schema_digest == content_schema_digest(TASK)
    assert entry.schema_digest == sha256_tag(canonical_json(TASK))


def test_a_schema_file_gives_the_same_build_as_the_same_schema_inline(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    # another key order and spacing: the same canonical schema
    (tmp_path / "schemas" / "task.json").write_text(json.dumps(dict(reversed(TASK.items()))))
    (from_file,) = loaded(tmp_path, HEAD + 'content_schema_file = "schemas/task.json"\n')
    (inline,) = loaded(tmp_path, INLINE)
    assert from_file.content_schema == TASK
    assert (from_file.build_digest, from_file.schema_digest) == (
        inline.build_digest,
        inline.schema_digest,
    )


def test_a_schema_change_is_a_new_build(tmp_path: Path) -> None:
    (without,) = loaded(tmp_path, HEAD)
    (with_schema,) = loaded(tmp_path, INLINE)
    (changed,) = loaded(tmp_path, INLINE.replace("maxLength = 200", "maxLength = 100"))
    assert without.content_schema is None and without.schema_digest == NO_SCHEMA_DIGEST
    assert len({without.build_digest, with_schema.build_digest, changed.build_digest}) == 3
    assert changed.schema_digest != with_schema.schema_digest


BAD = [
    (
        "not a schema",
        HEAD + 'content_schema = { type = "strin" }\n',
        "content_schema: not a valid JSON Schema (Draft 2020-12) at /type:",
    ),
    (
        "a bad pattern",
        HEAD + 'content_schema = { properties = { t = { pattern = "(" } } }\n',
        "content_schema: not a valid JSON Schema (Draft 2020-12) at /properties/t/pattern:",
    ),
    (
        "a remote reference",
        HEAD + 'content_schema = { "$ref" = "https://schemas.example/task.json" }\n',
        'content_schema: $ref "https://schemas.example/task.json" is not local',
    ),
    (
        "a reference to nothing",
        HEAD + 'content_schema = { "$ref" = "#/$defs/task" }\n',
        'content_schema: $ref "#/$defs/task" names nothing in the schema',
    ),
    (
        "a reference loop",
        HEAD + 'content_schema = { "$ref" = "#" }\n',
        "content_schema: a $ref refers to itself without end",
    ),
    (
        "another draft",
        HEAD + 'content_schema = { "$schema" = "http://json-schema.org/draft-07/schema#" }\n',
        "content_schema: $schema must be https://json-schema.org/draft/2020-12/schema",
    ),
    (
        "a TOML date",
        HEAD + "content_schema = { default = 2026-01-01 }\n",
        "content_schema: values must be JSON (not date",
    ),
    ("not finite", HEAD + "content_schema = { maximum = inf }\n", "numbers must be finite"),
    ("not a table", HEAD + 'content_schema = "task"\n', "content_schema: Input should be"),
    (
        "both forms",
        HEAD + 'content_schema = {}\ncontent_schema_file = "x.json"\n',
        "content_schema_file: give content_schema or content_schema_file",
    ),
    (
        "a missing file",
        HEAD + 'content_schema_file = "nope.json"\n',
        "content_schema_file nope.json: cannot read (No such file or directory)",
    ),
]


@pytest.mark.parametrize(("case", "text", "expected"), BAD, ids=[b[0] for b in BAD])
def test_an_unusable_schema_stops_start_up_in_one_line_naming_the_key(
    tmp_path: Path, case: str, text: str, expected: str
) -> None:
    message = refusal(tmp_path, text)
    assert expected in message, message


def test_a_schema_file_that_is_not_json_or_too_large_or_deep_is_named(tmp_path: Path) -> None:
    cases = {
        "bad.json": ("{", "content_schema_file bad.json: not valid JSON"),
        "nan.json": ('{"maximum": NaN}', "content_schema_file nan.json: not valid JSON"),
        "big.json": (
            json.dumps({"description": "x" * 300_000}),
            "content_schema_file big.json: larger than 262144 bytes",
        ),
        "deep.json": (
            '{"not": ' * 40 + "{}" + "}" * 40,
            "content_schema_file deep.json: nested more than 32 levels",
        ),
        "wide.json": (
            json.dumps({"enum": ["x" * 1000] * 70}),
            "content_schema_file wide.json: larger than 65536 bytes canonical",
        ),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text)
        message = refusal(tmp_path, HEAD + f'content_schema_file = "{name}"\n')
        assert expected in message, message


class SchemaPlugin:
    """A plugin executor declaring a content schema."""

    capability = "notes.append"
    delivery_mode = DeliveryMode.PROVIDER_IDEMPOTENCY
    build_digest = sha256_tag(b"schema-plugin v1")

    def __init__(self, schema: Any) -> None:
        self.content_schema = schema

    def execute(self, request: Any) -> Any:
        raise AssertionError("not called")


class Point:
    """An entry point whose factory returns one ``SchemaPlugin``."""

    name = "schema-plugin"
    value = "tests:schema_plugin"

    def __init__(self, schema: Any) -> None:
        self.schema = schema

    def load(self) -> Any:
        return lambda settings: [SchemaPlugin(self.schema)]


def test_a_plugins_schema_is_listed_and_a_bad_one_names_the_plugin() -> None:
    settings = load_settings(store="memory", fake_executors=False)
    schema = {"type": "object", "required": ["text"]}
    result = load_executors(settings, plugins=[Point(schema)])  # type: ignore[list-item]
    (entry,) = result.registry.entries()
    assert (entry.content_schema, entry.schema_digest) == (schema, content_schema_digest(schema))
    with pytest.raises(ExecutorConfigError) as caught:
        load_executors(settings, plugins=[Point({"type": 7})])  # type: ignore[list-item]
    assert str(caught.value).startswith(
        "executor plugin 'schema-plugin' (tests:schema_plugin): notes.append: content_schema: "
        "not a valid JSON Schema (Draft 2020-12) at /type:"
    )
