"""The gateway's crash table: the worker dies at each boundary of a gated call
(before the call, after the downstream effect, before the result is recorded,
and the two before those), in both delivery modes a gated tool may declare, on
SQLite and on the DynamoDB emulator. The downstream server counts every
``tools/call`` per idempotency key: at most one effect per key, and
operator-only mode never calls again by itself (``outcome_unknown``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.store import LedgerStore
from domain.services.execution import CrashPoint, SimulatedCrash
from tests.support.mcp_world import Downstream
from tests.support.worlds.execution import CrashAfterEffect, CrashAt
from tests.support.worlds.mcp_gateway import GatewayWorld, gateway_world

pytestmark = pytest.mark.slow  # a downstream server process, a session per call

MODES = ["provider_idempotency", "operator_reconciliation_only"]
BOUNDARIES = {
    "none": None,
    "after_lease": CrashPoint.AFTER_LEASE,
    "before_call": CrashPoint.AFTER_DISPATCH_MARKER,
    "after_effect": None,  # the downstream applied it; the worker dies before it returns
    "before_recorded": CrashPoint.AFTER_RESPONSE,
}

# (status after recovery, downstream effects, downstream tools/call requests) per key
CRASHES = {
    ("none", "provider_idempotency"): ("succeeded", 1, 1),
    ("none", "operator_reconciliation_only"): ("succeeded", 1, 1),
    ("after_lease", "provider_idempotency"): ("succeeded", 1, 1),
    ("after_lease", "operator_reconciliation_only"): ("succeeded", 1, 1),
    ("before_call", "provider_idempotency"): ("succeeded", 1, 1),
    ("before_call", "operator_reconciliation_only"): ("outcome_unknown", 0, 0),
    ("after_effect", "provider_idempotency"): ("succeeded", 1, 2),
    ("after_effect", "operator_reconciliation_only"): ("outcome_unknown", 1, 1),
    ("before_recorded", "provider_idempotency"): ("succeeded", 1, 2),
    ("before_recorded", "operator_reconciliation_only"): ("outcome_unknown", 1, 1),
}


@pytest.fixture(scope="module")
def downstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One tasks service for the module; every attempt has its own key."""
    state = tmp_path_factory.mktemp("downstream") / "tasks.db"
    server = Downstream(state)
    yield server.url, state
    server.stop()


@pytest.fixture
def store(engine_store: LedgerStore) -> LedgerStore:
    return engine_store


@pytest.fixture
def gworld(
    store: LedgerStore, downstream: tuple[str, Path], tmp_path: Path
) -> Iterator[GatewayWorld]:
    world = gateway_world(store, downstream[0], downstream[1], tmp_path)
    yield world
    assert world.loaded is not None
    world.loaded.registry.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("boundary", list(BOUNDARIES))
def test_a_gated_call_survives_a_crash_at_each_boundary(
    gworld: GatewayWorld, boundary: str, mode: str
) -> None:
    attempt_id = gworld.approved(mode)
    if boundary == "after_effect":
        gworld.swap(mode, CrashAfterEffect)
    point = BOUNDARIES[boundary]
    if boundary != "none":
        with pytest.raises(SimulatedCrash):
            gworld.worker(CrashAt(point) if point else None).process(attempt_id)
    else:
        gworld.worker().process(attempt_id)
    for _ in range(3):  # more ticks change nothing: outcome_unknown is never requeued
        gworld.recover_after_lease()

    attempt = gworld.attempt(attempt_id)
    found = (attempt.status.value, gworld.effects_of(attempt_id), gworld.requests_of(attempt_id))
    assert found == CRASHES[(boundary, mode)]
    if found[0] == "succeeded":
        assert attempt.result is not None
        assert attempt.result["receipt"]["id"].startswith(("task_", "msg_"))


@pytest.mark.parametrize("change", ["schema_changed", "server_gone"])
def test_a_changed_or_vanished_downstream_tool_is_never_called_on_the_old_build(
    store: LedgerStore, tmp_path: Path, change: str
) -> None:
    state = tmp_path / "tasks.db"
    server = Downstream(state)
    world = gateway_world(store, server.url, state, tmp_path)
    try:
        attempt_id = world.approved("provider_idempotency")
        server.stop()
        if change == "schema_changed":  # the same server, upgraded: create_task wants `due`
            server = Downstream(state, variant="v2", port=server.port)
        world.worker().process(attempt_id)
        for _ in range(2):
            world.recover_after_lease()
        attempt = world.attempt(attempt_id)
    finally:
        server.stop()
        assert world.loaded is not None
        world.loaded.registry.close()
    assert attempt.status.value == "failed_safe"
    assert attempt.result is not None
    assert (
        attempt.result["reason_code"]
        == {
            "schema_changed": "downstream_tool_changed",
            "server_gone": "downstream_unavailable",
        }[change]
    )
    assert world.requests_of(attempt_id) == 0  # nothing was called
