"""The template, read once per session, raw and as SAM transforms it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.sam_template import load_template, transform_template


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="session")
def transformed(template: dict[str, Any]) -> dict[str, Any]:
    return transform_template(template)
