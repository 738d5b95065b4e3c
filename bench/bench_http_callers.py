"""More HTTP clients, more lifecycles: ``ledger serve`` on SQLite with 1 and 8
concurrent clients, the write path before group commit beside the one with it,
in one run.

Two servers, each the real ``ledger serve`` (uvicorn, the worker, the
subscribers and recovery, fake executors) on its own SQLite file on the
repository's disk, run side by side: "before" is this script with ``--serve
before`` (``group_commit_before.OneByOneRecorder`` installed: every write its
own transaction and fsync, taken in turn), "after" the same with ``--serve
after`` (the code as it is: writes that arrive together share one transaction
and one fsync). Each client is a thread with its own httpx client
(keep-alive) running whole lifecycles: propose, present, approve, then ``GET
/execution-attempts/{id}?wait=30`` until ``succeeded``. Rounds alternate the
servers (order flipped per round) and the client counts; the rate is whole
lifecycles per wall second of the round. Target (issue: group commit): 8
clients >= 1.5x one client.

Run: ``.venv/bin/python bench/bench_http_callers.py [--quick]``.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from bench_wake import Client, Server, arguments, cpu_seconds, run_serve, running
from harness import Report

CLIENTS = (1, 8)


def serve(path: str, port: int) -> None:
    """The child: ``ledger serve`` on the store the environment names."""
    if path == "before":
        from group_commit_before import OneByOneRecorder

        import adapters.sqlite.backend

        adapters.sqlite.backend.SQLiteLedgerRecorder = OneByOneRecorder  # type: ignore[misc]
    run_serve(port)


class Tally:
    """What one (server, client count) cell measured over its rounds."""

    def __init__(self) -> None:
        self.lifecycles = 0
        self.seconds = 0.0
        self.server_cpu = 0.0

    @property
    def rate(self) -> float:
        """Lifecycles per second."""
        return self.lifecycles / self.seconds

    @property
    def cpu_ms(self) -> float:
        """The server's CPU milliseconds per lifecycle."""
        return self.server_cpu / self.lifecycles * 1000

    @property
    def busy(self) -> float:
        """The share of one core the server was busy."""
        return self.server_cpu / self.seconds


def run_round(server: Server, clients: list[Client], per_client: int, tally: Tally) -> None:
    """Every client runs ``per_client`` lifecycles at once; the round's wall time."""
    errors: list[BaseException] = []

    def one(client: Client) -> None:
        try:
            for _ in range(per_client):
                client.lifecycle()
        except BaseException as exc:  # reported below, after every thread ended
            errors.append(exc)

    assert server.process is not None
    cpu = cpu_seconds(server.process.pid)
    threads = [threading.Thread(target=one, args=(c,)) for c in clients]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tally.seconds += time.perf_counter() - started
    tally.server_cpu += cpu_seconds(server.process.pid) - cpu
    if errors:
        raise errors[0]
    tally.lifecycles += per_client * len(clients)


def measure(
    servers: list[Server], rounds: int, per_client: int, warmup: int
) -> dict[tuple[str, int], Tally]:
    tallies = {(s.path, n): Tally() for s in servers for n in CLIENTS}
    pools = {s.path: [Client(s.base, s.spec) for _ in range(max(CLIENTS))] for s in servers}
    for server in servers:
        for client in pools[server.path]:
            for _ in range(warmup):
                client.lifecycle()
    for n in range(rounds):
        order = servers if n % 2 == 0 else list(reversed(servers))
        counts = CLIENTS if n % 2 == 0 else tuple(reversed(CLIENTS))
        for count in counts:
            for server in order:
                # the same number of lifecycles per cell: fewer each with more clients
                each = max(1, per_client // count)
                run_round(server, pools[server.path][:count], each, tallies[(server.path, count)])
    for clients in pools.values():
        for client in clients:
            client.close()
    return tallies


def main() -> None:
    args = arguments(__doc__)
    if args.serve:
        serve(args.serve, args.port)
        return

    report = Report("bench_http_callers", args.quick)
    rounds, per_client, warmup = (2, 8, 1) if args.quick else (4, 80, 3)
    folder = Path(__file__).resolve().parent.parent / "var"  # the repository's disk
    folder.mkdir(exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="bench-http-callers-", dir=folder) as tmp,
        running(tmp, __file__) as servers,
    ):
        tallies = measure(servers, rounds, per_client, warmup)

    rows = []
    for server in servers:
        one = tallies[(server.path, CLIENTS[0])]
        for count in CLIENTS:
            tally = tallies[(server.path, count)]
            rows.append(
                [
                    server.path,
                    count,
                    tally.lifecycles,
                    f"{tally.rate:.1f}",
                    f"{tally.rate / one.rate:.2f}",
                    f"{tally.cpu_ms:.1f}",
                ]
            )
    report.table(
        "ledger serve on SQLite (disk): lifecycles per second, 1 vs 8 HTTP clients",
        [
            "path",
            "clients",
            "lifecycles",
            "lifecycles/s",
            "ratio to 1 client",
            "server CPU ms per lifecycle",
        ],
        rows,
        align="lrrrrr",
    )
    (ratio,) = [float(r[4]) for r in rows if r[0] == "after" and r[1] == CLIENTS[-1]]
    verdict = "met" if ratio >= 1.5 else "not met"
    summary = f"**8 clients / 1 client (after): {ratio:.2f}x; target >= 1.5x: {verdict}.**"
    print(summary)
    report.add(summary)
    one, many = tallies[("after", CLIENTS[0])], tallies[("after", CLIENTS[-1])]
    report.add(
        BOUND.format(
            one_rate=one.rate,
            one_ms=one.cpu_ms,
            busy=one.busy,
            cap=1000 / one.cpu_ms,
            many_ms=many.cpu_ms,
            most=1 / one.busy,  # a core wholly busy instead of this share of it
        )
    )
    report.write(INTRO.format(rounds=rounds, per=per_client, warmup=warmup, cpus=os.cpu_count()))


INTRO = """
Two `ledger serve` processes (uvicorn, the worker, the subscribers and
recovery, the fake executors) on their own SQLite files on the repository's
disk, side by side: "before" with every write its own transaction and fsync
(`bench/group_commit_before.py`), "after" with group commit. Each client is a
thread with its own keep-alive httpx client; {warmup} lifecycle(s) of warm-up
per client, then {rounds} rounds alternating the servers and the client
counts; each cell runs {per} lifecycles a round (one client: {per} in turn; 8
clients: {per} between them, at once). A lifecycle is propose, present,
approve, then `GET /execution-attempts/{{id}}?wait=30` until `succeeded`. The
clients run in this process, on the same {cpus} CPUs as the server: the rate
follows the share of the cores the server gets; the server's CPU per lifecycle
(user+system from /proc) does not.
"""

BOUND = """
What bounds it: one `ledger serve` is one Python process, and its CPU per
lifecycle ({one_ms:.1f} ms here with one client: HTTP parsing and validation
of four requests, token checks, the approval's commit, the worker, the
projector and the subscribers) caps it near {cap:.0f} lifecycles/s on one core
whatever the clients do. One client ({one_rate:.1f}/s) already keeps it
{busy:.2f} of a core busy, so more clients cannot add more than about
{most:.2f}x, and they add their own cost ({many_ms:.1f} ms per lifecycle with
8: more connections and waits at once). Group commit removes the fsync each
write waited for in turn (compare "before"); the 1.5x target needs the
server's CPU per lifecycle about halved, or more than one serving process on
the store (several `ledger serve` on one SQLite file each commit on their own:
group commit does not span processes).
"""


if __name__ == "__main__":
    main()
