"""The spec is validated when it is proposed; the approval and the pre-dispatch
recheck of the same process take it back by its payload hash. A worker in
another process (nothing remembered) validates it once."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

import domain.spec
from domain.spec import ProposalSpec
from tests.support.worlds.execution import ExecutionWorld


@pytest.fixture()
def validations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setattr(domain.spec, "_validated", OrderedDict())
    seen: list[Any] = []
    real = ProposalSpec.model_validate.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ProposalSpec], data: Any, **kwargs: Any) -> ProposalSpec:
        seen.append(data)
        result: ProposalSpec = real(cls, data, **kwargs)
        return result

    monkeypatch.setattr(ProposalSpec, "model_validate", classmethod(counted))
    return seen


def test_one_lifecycle_validates_its_spec_once(
    xworld: ExecutionWorld, validations: list[Any]
) -> None:
    attempt_id = xworld.approved("provider_idempotency")
    assert len(validations) == 1  # the proposal; the approval took it back by its hash
    assert xworld.worker().process(attempt_id).value == "succeeded"
    assert len(validations) == 1
    assert xworld.calls_for(attempt_id) == 1


def test_a_worker_that_never_saw_the_spec_validates_it(
    xworld: ExecutionWorld, validations: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    attempt_id = xworld.approved("provider_idempotency")
    monkeypatch.setattr(domain.spec, "_validated", OrderedDict())  # as in another process
    assert xworld.worker().process(attempt_id).value == "succeeded"
    assert len(validations) == 2
