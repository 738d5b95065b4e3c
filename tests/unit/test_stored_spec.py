"""A stored spec is validated once per process: read back by its payload hash,
the bytes of a spec this process validated are not validated again; any other
bytes are, in full."""

from __future__ import annotations

import json
import unicodedata
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pytest

import domain.spec
from domain.errors import InvalidSpec
from domain.spec import ProposalSpec, parse_spec, stored_spec, validated_payload_hash
from tests.support.factories import spec_data


@pytest.fixture(autouse=True)
def empty_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(domain.spec, "_validated", OrderedDict())


@pytest.fixture()
def validations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    seen: list[Any] = []
    real = domain.spec.parse_spec

    def counted(data: Any) -> ProposalSpec:
        seen.append(data)
        return real(data)

    monkeypatch.setattr(domain.spec, "parse_spec", counted)
    yield seen


def as_stored(spec: ProposalSpec) -> Any:
    """What a store hands back: the canonical mapping after a JSON round trip."""
    return json.loads(json.dumps(spec.canonical_dict()))


def test_a_spec_read_back_by_its_hash_is_not_validated_again(validations: list[Any]) -> None:
    spec = parse_spec(spec_data())
    tag = validated_payload_hash(spec)
    assert stored_spec(as_stored(spec), tag) is spec
    assert validations == []


def test_other_bytes_under_the_same_hash_are_validated_in_full(validations: list[Any]) -> None:
    spec = parse_spec(spec_data())
    tag = validated_payload_hash(spec)
    changed = as_stored(spec) | {"destination": "elsewhere"}
    assert stored_spec(changed, tag) is None  # a hash mismatch, found by full validation
    assert len(validations) == 1


def test_invalid_stored_data_is_refused_whatever_is_remembered(validations: list[Any]) -> None:
    spec = parse_spec(spec_data())
    tag = validated_payload_hash(spec)
    with pytest.raises(InvalidSpec):
        stored_spec(as_stored(spec) | {"extra": 1}, tag)
    with pytest.raises(InvalidSpec):
        stored_spec({"content": {"x": 1.5}}, tag)  # not even canonical JSON in the domain
    assert len(validations) == 2


def test_a_process_that_never_validated_it_validates_once(validations: list[Any]) -> None:
    spec = parse_spec(spec_data())
    tag = domain.spec.payload_hash(spec)  # validated elsewhere: nothing remembered here
    first = stored_spec(as_stored(spec), tag)
    assert first == spec and len(validations) == 1
    assert stored_spec(as_stored(spec), tag) is first and len(validations) == 1


def test_a_non_canonical_spelling_is_validated_and_judged_by_its_normal_form(
    validations: list[Any],
) -> None:
    spec = parse_spec(spec_data(content={"title": "Café"}))
    tag = validated_payload_hash(spec)
    spelled = as_stored(spec)
    spelled["content"]["title"] = unicodedata.normalize("NFD", "Café")
    assert stored_spec(spelled, tag) == spec
    assert len(validations) == 1


def test_the_memo_is_bounded() -> None:
    for n in range(domain.spec._VALIDATED_MAX + 50):
        validated_payload_hash(parse_spec(spec_data(content={"n": n})))
    assert len(domain.spec._validated) == domain.spec._VALIDATED_MAX
