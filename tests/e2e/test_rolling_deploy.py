"""A rolling deploy loses nothing (I11): two `ledger serve` processes on one store,
one hosting build v1 only and one hosting v1 (draining) and v2, 20 attempts of
each build approved through whichever server answers while one of them is
killed and started again: every attempt `succeeded`, exactly one effect per
key at the provider, none `executor_not_registered`.

Before I11 held, the v1-only server refused the approvals of v2 it received
(the uniform 404) and failed every v2 attempt it leased first
(`failed_safe executor_not_registered`); see `python -m tests.support.rolling`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.provider_fixtures import Provider
from tests.support.restart import Harness, StoreUnderTest
from tests.support.rolling import Deploy, Rollout, rollout

pytestmark = pytest.mark.slow  # real server processes, one restarted

# The restart lands after a third of the approvals (`python -m tests.support.rolling` runs 50).
PER_BUILD = 20


@pytest.fixture
def deploy_on(tmp_path: Path, provider: Provider) -> Iterator[Any]:
    made: list[Harness] = []

    def make(store: StoreUnderTest) -> Deploy:
        harness = Harness(store, tmp_path)
        made.append(harness)
        return Deploy(harness, provider.url, provider.token)

    yield make
    for harness in made:
        harness.close()


def check(found: Rollout, provider: Provider) -> None:
    found.effects = provider.effects()
    labels = sorted(found.approved.values())
    assert found.refused == 0
    assert labels.count("v1") == PER_BUILD and labels.count("v2") == PER_BUILD
    assert dict(found.statuses) == {"succeeded": 2 * PER_BUILD}, (found.statuses, found.reasons)
    assert found.reasons["executor_not_registered"] == 0
    assert all(found.effects[found.keys[a]] == 1 for a in found.approved)
    assert len(set(found.builds.values())) == 2  # each attempt ran on the build it was bound to


@pytest.mark.parametrize("restart", ["both", "v1"])
def test_a_rolling_deploy_on_sqlite_succeeds_every_attempt_once(
    deploy_on: Any, tmp_path: Path, provider: Provider, restart: str
) -> None:
    deploy = deploy_on(StoreUnderTest.sqlite(tmp_path))
    check(rollout(deploy, per_build=PER_BUILD, restart=restart), provider)


@pytest.mark.dynamodb
def test_a_rolling_deploy_on_dynamodb_succeeds_every_attempt_once(
    deploy_on: Any,
    dynamodb_endpoint: str,
    dynamodb_client: Any,
    dynamodb_table_name: str,
    provider: Provider,
) -> None:
    store = StoreUnderTest.dynamodb(dynamodb_endpoint, dynamodb_table_name, dynamodb_client)
    check(rollout(deploy_on(store), per_build=PER_BUILD), provider)
