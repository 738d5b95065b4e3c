"""The emulator for the deployed stack: a ministack process with every service,
a clean environment and its own temporary folder, and proof that it and
every process it started (the Lambda functions' workers) are gone at the end.

The Lambda workers inherit the emulator's environment, so it is built from
scratch (no ``LEDGER_*``, ``AWS_*`` or virtual environment of the caller can
leak into a function) and carries a marker variable naming this run. At the
end every process carrying the marker is killed by its pid, and a scan of the
process table proves none is left.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ministack import HOST, find_executable, free_port

MARKER = "LEDGER_E2E_AWS_RUN"
# Passed through from the caller: what a process needs to run, nothing of ours.
KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def marked_processes(marker: str, *also: str) -> dict[int, str]:
    """pid -> command line of every process whose environment carries ``marker``
    (and every ``NAME=value`` of ``also``)."""
    found: dict[int, str] = {}
    needles = [f"{MARKER}={marker}".encode(), *(a.encode() for a in also)]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            variables = environ.split(b"\0")
            if any(needle not in variables for needle in needles):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found[int(entry.name)] = cmdline.strip()[:160]
    return found


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost (and its key), valid for a day."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ledger-e2e-emulator")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir()
    cert_path, key_path = folder / "server.crt", folder / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


def clean_environment(
    marker: str, tmpdir: Path, port: int, tls: tuple[Path, Path]
) -> dict[str, str]:
    env = {name: os.environ[name] for name in KEPT if name in os.environ}
    # No virtual environment of ours on the path: the functions must run from
    # their package alone (the emulator runs them with its own interpreter).
    env["PATH"] = os.pathsep.join(
        part
        for part in env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
        if not part.startswith(str(Path(sys.prefix)))
    )
    env.update(
        {
            MARKER: marker,
            "TMPDIR": str(tmpdir),
            "BIND_HOST": HOST,
            "GATEWAY_PORT": str(port),
            "LOG_LEVEL": "WARNING",
            # IAM on: every call a function makes is evaluated against its role.
            "AUTH": "true",
            # HTTPS, as on AWS: the checkpoint bucket denies every request without TLS.
            # The functions are given a CA bundle that trusts this certificate.
            "USE_SSL": "1",
            "MINISTACK_SSL_CERT": str(tls[0]),
            "MINISTACK_SSL_KEY": str(tls[1]),
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    return env


@dataclass
class Emulator:
    """A running ministack with every service, on loopback."""

    process: subprocess.Popen[bytes]
    url: str
    port: int
    marker: str
    tmpdir: Path
    log_path: Path
    ca_file: str
    killed: dict[int, str] = field(default_factory=dict)

    def answers(self) -> bool:
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
            with urllib.request.urlopen(
                self.url + "/_ministack/health", timeout=1, context=context
            ) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def functions(self) -> dict[int, str]:
        """The processes the emulator started (its functions' workers): the marked
        ones that inherited its temporary folder, the emulator itself excepted."""
        found = marked_processes(self.marker, f"TMPDIR={self.tmpdir}")
        found.pop(self.process.pid, None)
        return found

    def kill_functions(self, seconds: float = 10) -> None:
        """SIGKILL every process of ``functions`` by pid until none is left."""
        deadline = time.monotonic() + seconds
        while left := self.functions():
            self.killed.update(left)
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes of this run are still alive: {left}")
            time.sleep(0.1)

    def stop(self) -> dict[int, str]:
        """Kill the functions' workers by pid (the emulator leaves them running when
        it stops, and waits on them), stop the emulator, then kill by pid anything
        of it that is still left. Returns what was killed."""
        self.kill_functions()
        if self.process.poll() is None:
            # A few seconds' grace: it keeps nothing on disk, and on a busy machine
            # its own shutdown can take longer than the rest of the teardown.
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.kill_functions()
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        return self.killed


def scratch_root() -> str | None:
    """Where a run keeps its files: memory-backed where Linux offers it, since the
    emulator unpacks the functions' package once per function (tens of thousands
    of small files to write and remove); otherwise the default temporary folder."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def start(marker: str, tmpdir: Path, timeout: float = 60.0) -> Emulator:
    """Start ministack (all services) on a free loopback port; wait until it answers.

    ``tmpdir`` (created here, removed by ``stop``) holds its log and the functions'
    unpacked code.
    """
    binary = find_executable()
    tmpdir.mkdir()
    port = free_port()
    log_path = tmpdir / "emulator.log"
    tls = self_signed_certificate(tmpdir / "tls")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [binary],
            env=clean_environment(marker, tmpdir, port, tls),
            cwd=tmpdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    emulator = Emulator(
        process, f"https://{HOST}:{port}", port, marker, tmpdir, log_path, str(tls[0])
    )
    deadline = time.monotonic() + timeout
    while not emulator.answers():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = emulator.log_tail()
            emulator.stop()
            raise RuntimeError(f"the emulator did not start on port {port}:\n{tail}")
        time.sleep(0.1)
    return emulator
