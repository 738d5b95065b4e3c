"""Run the DynamoDB emulator in a container with testcontainers.

``LEDGER_TEST_DYNAMODB=container`` makes the DynamoDB fixture use this instead
of a ministack subprocess. The image comes from ``LEDGER_TEST_EMULATOR_IMAGE``
(default: the emulator's published image at the pinned version; ``make
emulator-image`` builds an image of that name locally, without a registry).

No reaper container is used (``TESTCONTAINERS_RYUK_DISABLED``): every container
is labelled with the pid of the process that started it and removed when the
session ends; a later session removes the ones whose owner died without
cleaning up (``reap_stale``). ``python -m tests.support.emulator_container``
probes the engine (``probe``) and proves nothing is left over (``leftovers``).
"""

from __future__ import annotations

import os
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from tests.support.ministack import SERVICES

MODE_ENV = "LEDGER_TEST_DYNAMODB"
IMAGE_ENV = "LEDGER_TEST_EMULATOR_IMAGE"
DEFAULT_IMAGE = "ministackorg/ministack:1.5.33"
LABEL = "ledger.test.emulator"
OWNER_LABEL = "ledger.test.owner"  # "<hostname>:<pid>" of the process that started it
PORT = 4566
HOST = "127.0.0.1"


class EngineUnavailable(RuntimeError):
    """No Docker engine answers, or the image is not present; the message says which."""


def wanted() -> bool:
    return os.environ.get(MODE_ENV, "").strip().lower() == "container"


def image_name() -> str:
    return os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE


def _settings() -> None:
    # The reaper image cannot be pulled where no registry is reachable; we clean up
    # ourselves. Loopback-only port bindings need the docker_host connection mode.
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")


def docker_client(timeout: float = 5.0) -> Any:
    """A docker SDK client that answered a ping, or ``EngineUnavailable``."""
    try:
        import docker
    except ImportError as exc:
        raise EngineUnavailable("the docker SDK is not installed (make install)") from exc
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # any failure means "no engine"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise EngineUnavailable(f"no Docker engine reachable ({first})") from exc
    return client


def probe(image: str | None = None) -> str:
    """Return the image name if an engine answers and has the image; else raise."""
    image = image or image_name()
    client = docker_client()
    try:
        import docker.errors

        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            raise EngineUnavailable(
                f"image {image} is not present: `make emulator-image` builds it locally "
                f"(or `docker pull {image}`)"
            ) from None
    finally:
        client.close()
    return image


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return True  # another machine's container: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (ValueError, PermissionError):
        return True
    return True


def labelled(client: Any) -> list[Any]:
    """Every container (running or not) started by this module."""
    return list(client.containers.list(all=True, filters={"label": LABEL}))


def reap_stale(client: Any) -> list[str]:
    """Remove labelled containers whose owning process is gone; return their ids."""
    removed = []
    for container in labelled(client):
        if not _owner_alive(container.labels.get(OWNER_LABEL, "")):
            container.remove(force=True)
            removed.append(container.short_id)
    return removed


@dataclass
class EmulatorContainer:
    """A running emulator container and its endpoint URL on loopback."""

    container: Any  # testcontainers DockerContainer
    url: str

    @property
    def id(self) -> str:
        return str(self.container.get_wrapped_container().id)

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/_ministack/health", timeout=1) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def logs(self, chars: int = 2000) -> str:
        try:
            out, err = self.container.get_logs()
            return (out + err).decode(errors="replace")[-chars:]
        except Exception:  # best effort, for an error message
            return ""

    def stop(self) -> None:
        """Stop and remove the container (and its anonymous volumes)."""
        wrapped = self.container.get_wrapped_container()
        if wrapped is not None:
            wrapped.remove(force=True, v=True)


def start(image: str | None = None, *, timeout: float = 60.0) -> EmulatorContainer:
    """Start the emulator image on a free loopback port and wait until it answers."""
    _settings()
    image = probe(image)
    from testcontainers.core.container import DockerContainer

    client = docker_client()
    try:
        reap_stale(client)
    finally:
        client.close()
    container = (
        DockerContainer(image)
        .with_env("SERVICES", SERVICES)
        .with_env("LOG_LEVEL", "WARNING")
        .with_env("GATEWAY_PORT", str(PORT))
        .with_env("BIND_HOST", "0.0.0.0")  # inside the container; published on loopback only
        .with_kwargs(labels={LABEL: "1", OWNER_LABEL: _owner()})
    )
    container.ports[PORT] = (HOST, None)  # docker publishes on 127.0.0.1, a free port
    container.start()
    node = EmulatorContainer(container, "")
    try:
        port = container.get_exposed_port(PORT)
        node.url = f"http://{HOST}:{port}"
        deadline = time.monotonic() + timeout
        while not node.answers():
            wrapped = container.get_wrapped_container()
            wrapped.reload()
            if wrapped.status not in ("created", "running") or time.monotonic() > deadline:
                raise EngineUnavailable(f"the emulator container did not answer:\n{node.logs()}")
            time.sleep(0.1)  # poll interval only; nothing is timed
    except BaseException:
        node.stop()
        raise
    return node


def main(argv: list[str]) -> int:
    """``probe``: print the image and exit 0 if the suite can run on containers, else
    print why and exit 1. ``leftovers [--all]``: list (and remove) the emulator
    containers whose owning process is gone (``--all``: every one); exit 1 if any.
    """
    command, flags = (argv[0] if argv else "probe"), set(argv[1:])
    try:
        if command == "probe":
            print(probe())
            return 0
        client = docker_client()
    except EngineUnavailable as exc:
        print(exc)
        return 1 if command == "probe" else 0  # no engine: nothing can be left over
    if command != "leftovers":
        print(f"unknown command {command!r}: probe or leftovers [--all]")
        return 2
    try:
        left = [
            c
            for c in labelled(client)
            if "--all" in flags or not _owner_alive(c.labels.get(OWNER_LABEL, ""))
        ]
        for container in left:
            print(f"left over: {container.short_id} {container.status} {container.labels}")
            container.remove(force=True, v=True)
        if not left:
            print("no emulator container left over")
        return 1 if left else 0
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
