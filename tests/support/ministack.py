"""Start and stop a ministack process (the local DynamoDB engine) on loopback.

Used by the test fixtures and by the benchmarks. The executable is found via
``LEDGER_MINISTACK_BIN``, then ``<repo>/.venv-ministack/bin/ministack``, then
``PATH``. When the Python beside that executable also has uvicorn and httptools
(``make`` installs them into ``.venv-ministack``), the emulator's ASGI app is
served by uvicorn with the httptools parser, which costs about a third less CPU
per request than ministack's own hypercorn (the DynamoDB suite spends a fifth of
its CPU in the emulator); the emulator's code and its answers are the same.
Otherwise the executable runs as shipped.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
# What the tests use of the emulator (s3: the audit checkpoint bucket); the
# subprocess and the container emulators start the same set.
SERVICES = "dynamodb,dynamodbstreams,s3"


class MinistackError(RuntimeError):
    """ministack could not be found or did not start."""


def find_executable() -> str:
    """The ministack executable, or a clear error saying how to get one."""
    explicit = os.environ.get("LEDGER_MINISTACK_BIN")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise MinistackError(f"LEDGER_MINISTACK_BIN={explicit} is not executable")
        return explicit
    local = REPO_ROOT / ".venv-ministack" / "bin" / "ministack"
    if os.access(local, os.X_OK):
        return str(local)
    found = shutil.which("ministack")
    if found:
        return found
    raise MinistackError(
        "ministack not found: run `make test` (it creates .venv-ministack), set "
        "LEDGER_MINISTACK_BIN, or point LEDGER_TEST_DYNAMODB_ENDPOINT at a running endpoint"
    )


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: ministack gets SIGTERM if the test process dies without cleaning up."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Ministack:
    """A running ministack process and its endpoint URL."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/_ministack/health", timeout=1) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, grace: float = 5.0) -> None:
        """Terminate, then kill if it does not exit in ``grace`` seconds."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=grace)
        self.log_path.unlink(missing_ok=True)


# Finds the modules without importing them (importing the emulator's app alone
# costs about 0.2 s of CPU, in every test worker and benchmark).
FINDS_SERVER = (
    "import importlib.util, sys; "
    "sys.exit(not all(importlib.util.find_spec(m) for m in ('httptools', 'uvicorn', 'ministack')))"
)


@functools.cache
def _uvicorn_python(binary: str) -> str | None:
    """The Python beside ``binary`` if it can serve ministack's app with uvicorn
    and httptools, else None."""
    python = Path(binary).resolve().parent / "python"
    if not python.exists():
        python = Path(binary).parent / "python"
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", FINDS_SERVER],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return str(python) if probe.returncode == 0 else None


def command(binary: str, port: int) -> list[str]:
    """How to run the emulator on ``port``: its app under uvicorn (httptools)
    when the Python beside ``binary`` has them, else ``binary`` itself."""
    python = _uvicorn_python(binary)
    if python is None:
        return [binary]
    return [
        python,
        "-m",
        "uvicorn",
        "ministack.app:app",
        "--host",
        HOST,
        "--port",
        str(port),
        "--http",
        "httptools",
        "--loop",
        "asyncio",
        "--lifespan",
        "on",
        "--log-level",
        "warning",
        "--no-access-log",
        "--timeout-keep-alive",
        "75",  # as ministack's own server
    ]


def start(*, executable: str | None = None, timeout: float = 30.0, tries: int = 3) -> Ministack:
    """Start ministack on a free loopback port and wait until it answers."""
    binary = executable or find_executable()
    last_error = ""
    for _ in range(tries):
        port = free_port()
        log_fd, log_name = tempfile.mkstemp(prefix="ministack-", suffix=".log")
        env = dict(
            os.environ,
            BIND_HOST=HOST,
            GATEWAY_PORT=str(port),
            SERVICES=SERVICES,
            LOG_LEVEL="WARNING",
        )
        try:
            process = subprocess.Popen(
                command(binary, port),
                env=env,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        finally:
            os.close(log_fd)  # the child keeps its own copy
        node = Ministack(process, f"http://{HOST}:{port}", Path(log_name))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if node.answers():
                return node
            try:  # doubles as the poll interval, and returns early if it died
                process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            break
        last_error = node.log_tail()
        node.stop()
    raise MinistackError(f"ministack did not start after {tries} tries:\n{last_error}")
