"""The emulator in a container (testcontainers): it answers DynamoDB over HTTP,
its container is removed when stopped, and a container whose owning process
died (a crashed session) is removed by the next start while a live session's
container is kept. Runs in the container pass of `make test`
(``LEDGER_TEST_DYNAMODB=container``) and is skipped, with the reason, elsewhere.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import emulator_container
from tests.support.dynamodb_fixtures import new_client

pytestmark = [pytest.mark.dynamodb]


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    if not emulator_container.wanted():
        pytest.skip("runs in the container pass (LEDGER_TEST_DYNAMODB=container)")
    try:
        emulator_container.probe()
        client = emulator_container.docker_client()
    except emulator_container.EngineUnavailable as exc:
        pytest.skip(str(exc))
    yield client
    client.close()


def _exists(client: Any, container_id: str) -> bool:
    return bool(client.containers.list(all=True, filters={"id": container_id}))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _labelled_sleeper(client: Any, owner: str) -> Any:
    return client.containers.run(
        emulator_container.image_name(),
        ["python3", "-c", "import time; time.sleep(120)"],
        detach=True,
        labels={emulator_container.LABEL: "1", emulator_container.OWNER_LABEL: owner},
    )


def test_the_container_answers_dynamodb_and_is_removed_when_stopped(engine: Any) -> None:
    box = emulator_container.start()
    try:
        assert box.url.startswith(f"http://{emulator_container.HOST}:")
        client = new_client(box.url)
        assert client.list_tables()["TableNames"] == []
        client.close()
        container_id = box.id
        assert _exists(engine, container_id)
    finally:
        box.stop()
    assert not _exists(engine, container_id)


def test_a_crashed_sessions_container_is_reaped_and_a_live_ones_is_kept(engine: Any) -> None:
    host = emulator_container.socket.gethostname()
    orphan = _labelled_sleeper(engine, f"{host}:{_dead_pid()}")
    alive = _labelled_sleeper(engine, emulator_container._owner())
    try:
        removed = emulator_container.reap_stale(engine)
        assert orphan.short_id in removed
        assert not _exists(engine, orphan.id)
        assert _exists(engine, alive.id)
    finally:
        for container in (orphan, alive):
            if _exists(engine, container.id):
                container.remove(force=True)
    assert not _exists(engine, alive.id)
