"""Issue 25.3 end to end, in real time: ``ledger serve`` runs a correlation_lookup
build of the http executor with its defaults (2 s timeout, no settle window
written) against the reference provider, which applies the effect 7 s after
the request, when the client has given up. Before, the lookup after the lease
answered "not applied" and the attempt ended ``failed_safe`` while the provider
held the effect (2 of 2 runs); now the default settle window covers it and the
lookup finds the effect: ``succeeded``, one effect, one request. The store
does not change the timing rule (the injected-clock tests of
``tests/integration/execution/test_no_effect_watch.py`` run it on every store);
``python -m tests.support.late_effect --store dynamodb`` runs this on the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.late_effect import run_late_effect
from tests.support.restart import StoreUnderTest

pytestmark = pytest.mark.slow  # real processes, about 35 s of real time


def check(found: Any) -> None:
    assert found.status == "succeeded", found
    assert found.provider_effects == 1 and found.provider_requests == 1, found


def test_a_late_effect_is_found_with_the_default_settings_on_sqlite(tmp_path: Path) -> None:
    check(run_late_effect(StoreUnderTest.sqlite(tmp_path), tmp_path))
