"""Request schemas for callers without HTTP: a request that fails its schema is
``InvalidInput`` with the same problems the HTTP API lists (one per failing
field: a JSON pointer and what was expected, never what was sent: I10)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from domain.errors import InvalidInput
from domain.problems import MAX_PROBLEMS, FieldProblem, from_pydantic, summary

M = TypeVar("M", bound=BaseModel)

__all__ = ["MAX_PROBLEMS", "describe_request_errors", "parse", "request_problems"]


def parse(model: type[M], data: Any) -> M:
    """``data`` validated as ``model``; InvalidInput (the HTTP API's 422) otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(problems=request_problems(exc.errors())) from None


def request_problems(errors: Iterable[Mapping[str, Any]]) -> list[FieldProblem]:
    """Every failing field of a request, in the order the validator found them."""
    return from_pydantic(errors)


def describe_request_errors(errors: Iterable[Mapping[str, Any]]) -> str:
    """The ``detail`` of a request that failed its schema: every failing field
    (up to ``MAX_PROBLEMS``, then how many more), never an input value."""
    return summary(request_problems(errors), "The request is not valid.")
