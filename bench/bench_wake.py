"""Approval to result over HTTP: one client against ``ledger serve`` on SQLite,
the work feed that waits for this process's next commit beside the one that
slept out its poll interval (``wake_before.py``), in one run.

Two servers, each the real ``ledger serve`` (uvicorn, the worker, the
subscribers and recovery, fake executors) on its own SQLite file, run side by
side: "before" is this script with ``--serve before`` (the sleeping feed
installed, then the CLI's ``serve``), "after" the same with ``--serve after``
(the code as it is). One httpx client with keep-alive runs whole lifecycles
against each in turn, rounds alternating the servers: propose, present,
approve, then ``GET /execution-attempts/{id}?wait=30`` until the result. The
latency measured is from the approval's answer to the result's answer; the
rate is whole lifecycles per second (four requests each). Each server's idle
CPU (user+system per wall second, from /proc) is measured over a window with
no request, once its CPU use has settled.

Run: ``.venv/bin/python bench/bench_wake.py [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness import ROOT, Lifecycle, Report, percentile, sqlite_store

HOST = "127.0.0.1"
API = "/api/conversational"
PATHS = ("before", "after")
TICKS = os.sysconf("SC_CLK_TCK")


def serve(path: str, port: int) -> None:
    """The child: ``ledger serve`` on the store the environment names."""
    if path == "before":
        import wake_before

        wake_before.install()
    run_serve(port)


def run_serve(port: int) -> None:
    """The CLI's ``ledger serve`` in this process (a child, its "before" installed)."""
    from api.cli import main

    sys.argv = ["ledger", "serve", "--host", HOST, "--port", str(port)]
    main()


def arguments(description: str | None) -> argparse.Namespace:
    """``--quick``, and the hidden ``--serve PATH --port N`` a child is started with."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a small smoke run (seconds)")
    parser.add_argument("--serve", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    return parser.parse_args()


@contextlib.contextmanager
def running(folder: str, script: str) -> Iterator[list[Server]]:
    """One server per path, each on its own file in ``folder``, started by
    ``script --serve``, answering and settled; stopped afterwards."""
    from tests.support.ministack import free_port

    servers = [Server(p, str(Path(folder) / f"{p}.db"), free_port(), script=script) for p in PATHS]
    try:
        for server in servers:
            server.spec = prepare(server.db_path)
            server.start()
        for server in servers:
            server.wait_until_up()
        for server in servers:
            assert server.process is not None
            settle(server.process.pid)
        yield servers
    finally:
        for server in servers:
            server.stop()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def settle(pid: int, limit: float = 30.0) -> None:
    """Until the server uses under 2 % of a CPU over half a second."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        if cpu_seconds(pid) - before < 0.01:
            return


@dataclass
class Server:
    """One ``ledger serve`` child on its own file, and what was measured on it."""

    path: str
    db_path: str
    port: int
    process: subprocess.Popen[bytes] | None = None
    latencies: list[float] = field(default_factory=list)
    lifecycles: int = 0
    seconds: float = 0.0
    idle_cpu: float = 0.0
    busy_cpu: float = 0.0  # the server's CPU seconds over the measured lifecycles
    client_cpu: float = 0.0  # this process's, over the same
    spec: dict[str, object] = field(default_factory=dict)
    script: str = str(Path(__file__))  # the script whose --serve runs the child

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        env.update(LEDGER_STORE="sqlite", LEDGER_SQLITE_PATH=self.db_path)
        self.process = subprocess.Popen(
            [sys.executable, self.script, "--serve", self.path, "--port", str(self.port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )

    def wait_until_up(self) -> None:
        import httpx

        assert self.process is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the {self.path} server exited early")
            try:
                if httpx.get(self.base + "/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("the server did not answer within 60 s")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


class Client:
    """One HTTP client with keep-alive and the tokens of the four roles it plays."""

    def __init__(self, base: str, spec: dict[str, object]) -> None:
        import httpx

        from adapters.settings import load_settings
        from api.http.auth import mint_token

        settings = load_settings()
        who = Lifecycle.who(0)
        self.who = who

        def bearer(role: str, subject: str, **claims: object) -> dict[str, str]:
            token = mint_token(settings, subject=subject, role=role, **claims)  # type: ignore[arg-type]
            return {"Authorization": f"Bearer {token}"}

        self.proposer = bearer("proposer", "assistant-backend")
        self.channel = bearer("channel", "chat-backend", provenance=who)
        self.owner = bearer("actor", who.actor_id)
        self.spec = spec
        self.http = httpx.Client(base_url=base + API, timeout=60)

    def lifecycle(self) -> float:
        """One whole lifecycle; the seconds from the approval's answer to the result's."""
        created = self.http.post(
            "/proposals",
            headers=self.proposer,
            json={"actor_id": self.who.actor_id, "spec": self.spec},
        )
        assert created.status_code == 201, created.text
        proposal_id = created.json()["proposal_id"]
        shown = self.http.post(
            f"/proposals/{proposal_id}/presentations",
            headers=self.proposer,
            json={
                "version": 1,
                "identity_binding_id": self.who.identity_binding_id,
                "channel_binding_id": self.who.channel_binding_id,
                "conversation_key": self.who.conversation_key,
            },
        )
        assert shown.status_code == 201, shown.text
        approved = self.http.post(
            "/approvals", headers=self.channel, json={"token": shown.json()["token"]}
        )
        assert approved.status_code == 202, approved.text
        answered = time.perf_counter()
        attempt_id = approved.json()["attempt_id"]
        result = self.http.get(
            f"/execution-attempts/{attempt_id}", params={"wait": 30}, headers=self.owner
        )
        done = time.perf_counter()
        assert result.status_code == 200, result.text
        assert result.json()["status"] == "succeeded", result.text
        return done - answered

    def close(self) -> None:
        self.http.close()


def prepare(db_path: str) -> dict[str, object]:
    """The directory of ``Lifecycle`` written in the file; the spec its actor may approve."""
    life = Lifecycle(sqlite_store(db_path))
    life.store.recorder.close()
    return life.spec()


def measure(servers: list[Server], rounds: int, per_round: int, warmup: int) -> None:
    """Rounds alternating the servers (order flipped each round); one client each."""
    clients = {server.path: Client(server.base, server.spec) for server in servers}
    for server in servers:
        for _ in range(warmup):
            clients[server.path].lifecycle()
    for n in range(rounds):
        for server in servers if n % 2 == 0 else list(reversed(servers)):
            client = clients[server.path]
            assert server.process is not None
            cpu, mine = cpu_seconds(server.process.pid), time.process_time()
            started = time.perf_counter()
            for _ in range(per_round):
                server.latencies.append(client.lifecycle())
            server.seconds += time.perf_counter() - started
            server.busy_cpu += cpu_seconds(server.process.pid) - cpu
            server.client_cpu += time.process_time() - mine
            server.lifecycles += per_round
    for client in clients.values():
        client.close()


def main() -> None:
    args = arguments(__doc__)
    if args.serve:
        serve(args.serve, args.port)
        return

    report = Report("bench_wake", args.quick)
    rounds, per_round, warmup, idle = (2, 10, 3, 2.0) if args.quick else (4, 50, 10, 5.0)
    with (
        tempfile.TemporaryDirectory(prefix="bench-wake-") as tmp,
        running(tmp, str(Path(__file__))) as servers,
    ):
        for server in servers:
            assert server.process is not None
            before = cpu_seconds(server.process.pid)
            time.sleep(idle)
            server.idle_cpu = (cpu_seconds(server.process.pid) - before) / idle
        measure(servers, rounds, per_round, warmup)

    base = servers[0]
    rows = []
    for server in servers:
        ms = [v * 1000 for v in server.latencies]
        rate = server.lifecycles / server.seconds
        rows.append(
            [
                server.path,
                server.lifecycles,
                f"{percentile(ms, 50):.1f}",
                f"{percentile(ms, 95):.1f}",
                f"{percentile(ms, 99):.1f}",
                f"{rate:.1f}",
                f"{rate / (base.lifecycles / base.seconds):.2f}",
                f"{server.busy_cpu / server.lifecycles * 1000:.1f}",
                f"{server.client_cpu / server.lifecycles * 1000:.1f}",
                f"{server.idle_cpu:.3f}",
            ]
        )
    report.table(
        "One HTTP client, approval to result on `?wait=`, same run",
        [
            "path",
            "lifecycles",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "lifecycles/s",
            "rate ratio",
            "server CPU ms per lifecycle",
            "client CPU ms per lifecycle",
            "idle CPU s/s",
        ],
        rows,
        align="lrrrrrrrrr",
    )
    report.write(INTRO.format(rounds=rounds, per=per_round, warmup=warmup, idle=idle))


INTRO = """
Two `ledger serve` processes (uvicorn, the worker, the subscribers and
recovery, the fake executors) on their own SQLite files, side by side:
"before" with the work feed that slept out its poll interval (0.2 s) when
caught up (`bench/wake_before.py`), "after" with the feed that waits for the
next commit made in its own process (the approval's), bounded by the same
interval for commits made elsewhere. One httpx client with keep-alive per
server, {warmup} lifecycles of warm-up each, then {rounds} rounds of {per}
lifecycles alternating the servers (order flipped per round). A lifecycle is
propose, present, approve, then `GET /execution-attempts/{{id}}?wait=30` until
`succeeded`; the latency is from the approval's answer to the result's, the
rate counts whole lifecycles. The CPU columns are the server's
user+system CPU time (from /proc) and this process's, per lifecycle: on a
shared machine the rate follows the share of the cores each gets, the CPU per
lifecycle does not. Idle CPU: each server's user+system CPU time
per wall second over {idle:.0f} s with no request, once it had settled.
"""


if __name__ == "__main__":
    main()
