"""Shared plumbing for the benchmarks (not a benchmark itself: `make bench` runs
only ``bench/bench_*.py``).

- ``Emulator``: a ministack on loopback for the length of a ``with`` block.
- ``CapacityMeter``: counts DynamoDB requests per operation, items written and
  read, and the write/read units DynamoDB would bill for them, computed from
  the item sizes in the request and response payloads (botocore event hooks).
- ``Lifecycle``: a directory and the services that take a proposal from
  propose to a recorded result, on any ledger store.
- ``Report``: prints a table and writes it to ``bench/results/<name>.md``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlite_before import pooled_recorder  # noqa: E402

from adapters.dynamodb.client import make_client  # noqa: E402
from adapters.dynamodb.recorder import DynamoDBLedgerRecorder  # noqa: E402
from adapters.dynamodb.schema import create_table  # noqa: E402
from adapters.executors.fake import (  # noqa: E402
    FAKE_CAPABILITIES,
    EffectLedger,
    fake_build_digest,
    fake_schema_digest,
    register_fakes,
)
from adapters.executors.registry import StaticExecutorRegistry  # noqa: E402
from adapters.sqlite.recorder import SQLiteLedgerRecorder, open_datastore  # noqa: E402
from adapters.store import LedgerStore  # noqa: E402
from adapters.system import SecretsTokenSource, SystemClock  # noqa: E402
from domain.directory import (  # noqa: E402
    DirectoryKind,
    actor_record_id,
    channel_binding_record_id,
    executor_build_record_id,
    grant_record_id,
    identity_binding_record_id,
    target_record_id,
)
from domain.ports import Clock  # noqa: E402
from domain.services.approval import Provenance, approve  # noqa: E402
from domain.services.context import ServiceContext  # noqa: E402
from domain.services.directory import put_record  # noqa: E402
from domain.services.execution import Outcome, Worker, WorkerPolicy  # noqa: E402
from domain.services.proposals import present, propose  # noqa: E402
from domain.services.read_cache import DEFAULT_ENTRIES, ReadCache  # noqa: E402
from tests.support import ministack  # noqa: E402

RESULTS = ROOT / "bench" / "results"
DIGEST = "sha256:" + "ab" * 32
PERMISSION = "tasks.write"
KB = 1024


# -- command line and results -------------------------------------------------------


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small smoke run (seconds); results are not meaningful",
    )
    return parser.parse_args()


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None
) -> str:
    """A Markdown table; ``align`` is one letter per column (l or r), default text left."""
    marks = align or "l" + "r" * (len(headers) - 1)
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if a == "r" else "---" for a in marks) + "|",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_line(started: float) -> str:
    return (
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end, ran in {time.perf_counter() - started:.0f} s"
    )


@dataclass
class Report:
    """A results file: a title, prose, and tables, printed and written together."""

    name: str
    quick: bool
    started: float = field(default_factory=time.perf_counter)
    parts: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.parts.append(text.strip("\n"))

    def table(
        self,
        title: str,
        headers: Sequence[str],
        rows: Sequence[Sequence[Any]],
        align: str | None = None,
    ) -> None:
        text = markdown_table(headers, rows, align)
        print(f"\n{title}\n{text}", flush=True)
        self.parts.append(f"### {title}\n\n{text}")

    def write(self, intro: str) -> Path:
        mode = " (--quick smoke run: sizes cut down, figures not meaningful)" if self.quick else ""
        head = (
            f"# {self.name}\n\n`python bench/{self.name}.py`{mode}; "
            f"{machine_line(self.started)}.\n\n{intro.strip()}\n"
        )
        body = "\n\n".join(self.parts)
        where = Path(os.environ.get("LEDGER_BENCH_RESULTS", RESULTS))
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{self.name}{'.quick' if self.quick else ''}.md"
        path.write_text(head + "\n" + body + "\n")
        print(f"\nwrote {path}")
        return path


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


# -- DynamoDB: the emulator and request metering ----------------------------------------


class Emulator:
    """A ministack process on loopback; ``client()`` builds real boto3 clients for it."""

    def __init__(self) -> None:
        self.node = ministack.start()
        self.url = self.node.url

    def client(self, **config: Any) -> Any:
        from adapters.dynamodb.client import client_config

        kwargs: dict[str, Any] = {}
        if config:
            kwargs["config"] = client_config(**config)
        return make_client(
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            **kwargs,
        )

    def streams_client(self) -> Any:
        import boto3

        return boto3.client(
            "dynamodbstreams",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )

    def table(self, client: Any, prefix: str = "bench") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        create_table(client, name)
        return name

    def stop(self) -> None:
        self.node.stop()

    def __enter__(self) -> Emulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def attribute_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value by DynamoDB's published item-size rules."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        digits = inner.lstrip("-").replace(".", "").lstrip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in inner)
    if kind == "NS":
        return sum(attribute_size({"N": n}) for n in inner)
    if kind == "BS":
        return sum(len(b) for b in inner)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + attribute_size(v) + 1 for k, v in inner.items())
    if kind == "L":
        return 3 + sum(attribute_size(v) + 1 for v in inner)
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: Mapping[str, Any]) -> int:
    """Bytes of an item: attribute names plus values."""
    return sum(len(name.encode("utf-8")) + attribute_size(v) for name, v in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / KB))


def read_units(size: int) -> int:
    return max(1, math.ceil(size / (4 * KB)))


WRITE_OPS = frozenset(
    {"PutItem", "DeleteItem", "UpdateItem", "TransactWriteItems", "BatchWriteItem"}
)
READ_OPS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
# The event items' key and recorded_at are read by a Query even though the
# projection leaves them out of the answer: capacity counts what was read.
RECORDED_AT_BYTES = len("recorded_at") + len("2026-11-29T12:00:00.000000Z")


@dataclass
class Usage:
    """Requests and capacity of a stretch of work."""

    requests: Counter[str] = field(default_factory=Counter)
    consistent_reads: int = 0
    items_written: int = 0
    condition_checks: int = 0
    items_read: int = 0
    wcu: float = 0.0
    rcu: float = 0.0
    gsi_wcu: float = 0.0
    bytes_written: int = 0

    @property
    def writes(self) -> int:
        return sum(n for op, n in self.requests.items() if op in WRITE_OPS)

    @property
    def reads(self) -> int:
        return sum(n for op, n in self.requests.items() if op in READ_OPS)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def ops(self) -> str:
        return ", ".join(f"{op} {n}" for op, n in sorted(self.requests.items())) or "-"

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            requests=Counter(
                {
                    op: self.requests[op] - other.requests[op]
                    for op in set(self.requests) | set(other.requests)
                    if self.requests[op] != other.requests[op]
                }
            ),
            consistent_reads=self.consistent_reads - other.consistent_reads,
            items_written=self.items_written - other.items_written,
            condition_checks=self.condition_checks - other.condition_checks,
            items_read=self.items_read - other.items_read,
            wcu=self.wcu - other.wcu,
            rcu=self.rcu - other.rcu,
            gsi_wcu=self.gsi_wcu - other.gsi_wcu,
            bytes_written=self.bytes_written - other.bytes_written,
        )

    def __add__(self, other: Usage) -> Usage:
        return self - (Usage() - other)

    def copy(self) -> Usage:
        return self - Usage()


class CapacityMeter:
    """Meters every request a client sends (thread-safe).

    Billing rules applied (DynamoDB's published ones): a write costs 1 WCU per
    KB of item, rounded up per item, doubled inside a transaction; a
    ``ConditionCheck`` in a transaction is billed like a transactional write of
    the checked item (2 WCU up to 1 KB); a delete costs at least 1 WCU (the
    due items it deletes are < 1 KB). A strongly consistent read costs 1 RCU
    per 4 KB (a Query rounds the total it read, GetItem and BatchGetItem each
    item, a missing item still costs 1); an eventually consistent read (the
    GSI queries) costs half. Index maintenance: a put on a ``due`` or listed
    view item writes the index once when the item is new and twice (delete +
    put) when it replaces an indexed item; a delete removes it once.
    """

    def __init__(self, client: Any) -> None:
        self.usage = Usage()
        self._lock = threading.Lock()
        self._indexed: set[str] = set()
        client.meta.events.register("provide-client-params.dynamodb", self._params)
        client.meta.events.register("after-call.dynamodb", self._after)

    def snapshot(self) -> Usage:
        with self._lock:
            return self.usage.copy()

    @contextmanager
    def measure(self) -> Iterator[Usage]:
        """``with meter.measure() as used:`` fills ``used`` with what the block cost."""
        result = Usage()
        before = self.snapshot()
        try:
            yield result
        finally:
            delta = self.snapshot() - before
            result.__dict__.update(delta.__dict__)

    @staticmethod
    def _params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["meter_params"] = params

    def _after(
        self,
        http_response: Any,
        parsed: dict[str, Any],
        model: Any,
        context: dict[str, Any],
        **_: Any,
    ) -> None:
        op = model.name
        params = context.get("meter_params", {})
        with self._lock:
            u = self.usage
            u.requests[op] += 1
            if op == "PutItem":
                self._put(params["Item"], 1)
            elif op == "DeleteItem":
                self._delete(params["Key"], 1)
            elif op == "TransactWriteItems":
                for action in params["TransactItems"]:
                    if "Put" in action:
                        self._put(action["Put"]["Item"], 2)
                    elif "Delete" in action:
                        self._delete(action["Delete"]["Key"], 2)
                    elif "ConditionCheck" in action:
                        u.condition_checks += 1
                        u.wcu += 2
                    elif "Update" in action:
                        u.items_written += 1
                        u.wcu += 2
                        # A head's update keeps its index keys (its bucket stays)
                        # and changes projected attributes: one index write.
                        if ":lpk" in action["Update"].get("ExpressionAttributeValues", {}):
                            u.gsi_wcu += 1
            elif op == "BatchWriteItem":
                for requests in params["RequestItems"].values():
                    for request in requests:
                        if "PutRequest" in request:
                            self._put(request["PutRequest"]["Item"], 1)
                        else:
                            self._delete(request["DeleteRequest"]["Key"], 1)
            elif op in ("Query", "Scan"):
                self._query(params, parsed)
            elif op == "GetItem":
                u.consistent_reads += 1 if params.get("ConsistentRead") else 0
                item = parsed.get("Item")
                u.items_read += 1 if item else 0
                u.rcu += self._read_cost(
                    item_size(item) if item else 0, bool(params.get("ConsistentRead"))
                )
            elif op == "BatchGetItem":
                consistent = all(t.get("ConsistentRead") for t in params["RequestItems"].values())
                u.consistent_reads += 1 if consistent else 0
                keys = sum(len(t["Keys"]) for t in params["RequestItems"].values())
                found = [i for items in parsed.get("Responses", {}).values() for i in items]
                u.items_read += len(found)
                u.rcu += sum(self._read_cost(item_size(i), consistent) for i in found)
                u.rcu += (keys - len(found)) * self._read_cost(0, consistent)
            elif op == "TransactGetItems":
                u.consistent_reads += 1
                for entry in parsed.get("Responses", []):
                    item = entry.get("Item")
                    u.items_read += 1 if item else 0
                    u.rcu += 2 * read_units(item_size(item) if item else 0)

    @staticmethod
    def _read_cost(size: int, consistent: bool) -> float:
        units = read_units(size)
        return float(units) if consistent else units / 2

    def _put(self, item: Mapping[str, Any], factor: int) -> None:
        u = self.usage
        size = item_size(item)
        u.items_written += 1
        u.bytes_written += size
        u.wcu += factor * write_units(size)
        pk = item["pk"]["S"]
        if "due_bucket" in item or "list_pk" in item:
            projected = size if "list_pk" in item else 80 + len(pk)
            u.gsi_wcu += write_units(projected) * (2 if pk in self._indexed else 1)
            self._indexed.add(pk)

    def _delete(self, key: Mapping[str, Any], factor: int) -> None:
        u = self.usage
        u.items_written += 1
        u.wcu += factor
        pk = key["pk"]["S"]
        if pk in self._indexed:
            u.gsi_wcu += 1
            self._indexed.discard(pk)

    def _query(self, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> None:
        u = self.usage
        consistent = bool(params.get("ConsistentRead"))
        u.consistent_reads += 1 if consistent else 0
        items = parsed.get("Items", [])
        u.items_read += len(items)
        size = sum(item_size(i) for i in items)
        if "IndexName" not in params:
            pk = params.get("ExpressionAttributeValues", {}).get(":pk", {}).get("S", "")
            size += len(items) * (2 + len(pk) + RECORDED_AT_BYTES)
        units = read_units(size)
        u.rcu += float(units) if consistent else units / 2


# -- a ledger and a directory to run lifecycles on ------------------------------------------


def sqlite_store(path: str, *, pooled: bool = False) -> LedgerStore:
    """``pooled``: the library's connection pool and a transaction per read (the path
    before per-thread connections, ``sqlite_before.py``), for side-by-side measurements."""
    recorder = pooled_recorder(path) if pooled else SQLiteLedgerRecorder(open_datastore(path))
    recorder.create_table()
    return LedgerStore(recorder)


class WithoutHeadIndex:
    """A recorder whose writes leave the head index out (what a commit cost before
    the head index, for side-by-side measurements; the head of each stream is
    still computed, one SHA-256 of bytes already encoded)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def insert_events(self, stored_events: Sequence[Any], **kwargs: Any) -> Any:
        return self.inner.insert_events(stored_events, **{**kwargs, "heads": ()})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def dynamodb_store(client: Any, table: str) -> LedgerStore:
    return LedgerStore(DynamoDBLedgerRecorder(table, client))


CAPABILITY = "fake.provider_idempotency"


@dataclass
class Lifecycle:
    """A directory of ``actors`` approvable actors on one store, and the services."""

    store: LedgerStore
    clock: Clock = field(default_factory=SystemClock)
    actors: int = 1
    registry: StaticExecutorRegistry = field(default_factory=StaticExecutorRegistry)
    effects: EffectLedger | None = None
    lease_seconds: int = 60
    # the read cache's size; 0 turns it off: the reads of the code before it
    cache_entries: int = DEFAULT_ENTRIES

    def __post_init__(self) -> None:
        if self.effects is None:
            self.effects = register_fakes(self.registry)
        self.ctx = ServiceContext(
            store=self.store,
            clock=self.clock,
            tokens=SecretsTokenSource(),
            permissions=frozenset({PERMISSION}),
            registry=self.registry,
            cache=ReadCache(self.cache_entries),
        )
        self.expires = (datetime.now(UTC) + timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for capability, mode in FAKE_CAPABILITIES.items():
            self.put(
                DirectoryKind.EXECUTOR_BUILD,
                executor_build_record_id(capability, fake_build_digest(capability)),
                delivery_mode=mode.value,
                available=True,
            )
        self.put(DirectoryKind.TARGET, target_record_id("task:42"), revision="r7")
        for n in range(self.actors):
            self.add_actor(n)

    def put(self, kind: DirectoryKind, record_id: str, **values: Any) -> None:
        put_record(
            self.store,
            self.clock,
            kind=kind,
            record_id=record_id,
            values=values,
            cache=self.ctx.cache,
        )

    @staticmethod
    def who(n: int) -> Provenance:
        return Provenance(f"actor{n}", f"ib{n}", f"cb{n}", f"conv-{n}")

    def add_actor(self, n: int) -> None:
        who = self.who(n)
        self.put(DirectoryKind.ACTOR, actor_record_id(who.actor_id), enabled=True)
        self.put(
            DirectoryKind.IDENTITY_BINDING,
            identity_binding_record_id(who.identity_binding_id),
            actor_id=who.actor_id,
            channel="chat",
            external_id=f"u{n}@chat",
            active=True,
        )
        self.put(
            DirectoryKind.CHANNEL_BINDING,
            channel_binding_record_id(who.channel_binding_id),
            conversation_key=who.conversation_key,
            channel="chat",
            active=True,
        )
        self.put(
            DirectoryKind.PERMISSION_GRANT, grant_record_id(who.actor_id, PERMISSION), granted=True
        )

    def spec(self, capability: str = CAPABILITY, simulate: str = "success") -> dict[str, Any]:
        return {
            "capability": capability,
            "executor_build": fake_build_digest(capability),
            "plugin_build": DIGEST,
            "schema_digest": fake_schema_digest(capability),
            "policy_digest": DIGEST,
            "permission": PERMISSION,
            "effect": "create",
            "target": {"id": "task:42", "base_revision": "r7"},
            "destination": "tasks",
            "content": {"title": "Buy milk", "simulate": simulate},
            "sources": ["message:123"],
            "expires_at": self.expires,
        }

    def propose_and_present(
        self, n: int = 0, capability: str = CAPABILITY, simulate: str = "success"
    ) -> tuple[str, str]:
        """(proposal id, token)."""
        who = self.who(n)
        proposal_id = propose(
            self.ctx, actor_id=who.actor_id, spec_data=self.spec(capability, simulate)
        ).proposal_id
        token = present(
            self.ctx,
            proposal_id=proposal_id,
            version=1,
            identity_binding_id=who.identity_binding_id,
            channel_binding_id=who.channel_binding_id,
            conversation_key=who.conversation_key,
        ).token
        return proposal_id, token

    def approve(self, token: str, n: int = 0) -> str:
        return approve(self.ctx, token=token, provenance=self.who(n)).attempt_id

    def worker(self, **hooks: Any) -> Worker:
        return Worker(self.ctx, WorkerPolicy(lease_seconds=self.lease_seconds), **hooks)

    def run(self, n: int = 0, worker: Worker | None = None) -> Outcome:
        """One full lifecycle: propose, present, approve, and the worker's run."""
        _, token = self.propose_and_present(n)
        attempt_id = self.approve(token, n)
        return (worker or self.worker()).process(attempt_id)


def run_threads(count: int, target: Callable[[int], None]) -> None:
    """Run ``target(i)`` on ``count`` threads; re-raise the first failure."""
    errors: list[BaseException] = []

    def wrapped(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
