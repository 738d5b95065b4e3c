"""Many concurrent first reads of a status right after its 202.

For each approval, ``readers`` threads read the new attempt's status at once
(a barrier releases them together) while the server's projector runs: the
readers and the projector race to store the same first view version.

    python -m tests.support.first_reads --approvals 75 --readers 4 [--code-dir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.support.http_approvals import API, approve_one, headers, set_up_directory
from tests.support.restart import Harness, StoreUnderTest


def first_reads(base: str, approvals: int, readers: int) -> Counter[int]:
    """HTTP status codes of every first read."""
    codes: Counter[int] = Counter()
    admin = headers("admin", subject="root")
    clients = [httpx.Client(base_url=base, timeout=30, headers=admin) for _ in range(readers)]
    try:
        with (
            httpx.Client(base_url=base, timeout=30) as writer,
            ThreadPoolExecutor(max_workers=readers) as pool,
        ):
            set_up_directory(writer)
            for n in range(approvals):
                attempt_id = approve_one(writer, n)
                barrier = threading.Barrier(readers)

                def read(
                    client: httpx.Client,
                    attempt_id: str = attempt_id,
                    barrier: threading.Barrier = barrier,
                ) -> int:
                    barrier.wait(timeout=30)
                    return client.get(f"{API}/execution-attempts/{attempt_id}").status_code

                for code in pool.map(read, clients):
                    codes[code] += 1
    finally:
        for client in clients:
            client.close()
    return codes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--approvals", type=int, default=75)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--code-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        harness = Harness(StoreUnderTest.sqlite(Path(folder)), Path(folder), args.code_dir)
        try:
            server = harness.serve(execution=False)
            codes = first_reads(server.base, args.approvals, args.readers)
        finally:
            harness.close()
    total = sum(codes.values())
    print(f"{total} first reads: " + ", ".join(f"{c}: {n}" for c, n in sorted(codes.items())))


if __name__ == "__main__":
    main()
