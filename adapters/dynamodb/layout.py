"""The table's layout record: how many head-index buckets and directory shards it has.

One item, ``layout#table``, says how the table spreads the keys every attempt
would otherwise share (docs/dynamodb.md, "No hot key"):

- ``head_buckets``: the ``list`` index partitions (``heads#<n>``) a stream's
  head may be listed under. A digest reads every one; a new head goes to
  ``sha256(stream id) mod head_buckets`` and stays in the bucket it was first
  written to, so raising the count never moves a head.
- ``directory_shards``: copies of each directory record's version
  (``<record id>#<n>``), all written in the transaction that changes the
  record; a commit that checks the record checks the one copy chosen by its
  own first stream id. Zero: no copies, every check reads the record's own
  next slot (what a table made before the layout record does).
- ``directory_checks``: ``slot`` while copies are being filled in (checks still
  read the record's own next slot), ``shard`` once every record has them.
- ``grant_use_shards``: the use shards a standing grant made now gets
  (``domain.standing_grants``); a grant keeps the count it was made with. A
  table that records none makes grants that count their uses on their own
  record, as every version before use shards does.
- ``due_buckets``: the ``due`` index partitions (``due#<n>``) a due entry may be
  in. Every writer and every reader of due work uses this count, so no process
  can enumerate fewer buckets than another writes to; a table that records
  none uses each process's ``LEDGER_DUE_WORK_BUCKETS``, as before.

A table without the item is a table made before it: 16 head buckets, no
shards, no due-bucket count (:data:`LEGACY`). ``ledger dynamodb migrate`` moves
it on (:func:`adapters.dynamodb.migrate.migrate`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from adapters.dynamodb import items as it
from adapters.dynamodb.items import SHARD_SEPARATOR, STRIPED_KINDS, is_shard_key, is_striped
from domain.directory import DirectoryKind
from domain.standing_grants import DEFAULT_USE_SHARDS, MAX_USE_SHARDS

POLICY_SET_PREFIX = DirectoryKind.POLICY_SET.value + ":"

__all__ = ["STRIPED_KINDS", "TableLayout", "is_shard_key", "is_striped"]

LAYOUT_PK = "layout#table"
HEAD_BUCKETS = "head_buckets"
DIRECTORY_SHARDS = "directory_shards"
POLICY_SET_SHARDS = "policy_set_shards"
DIRECTORY_CHECKS = "directory_checks"
LAYOUT_VERSION = "layout_version"
DUE_BUCKETS = "due_buckets"
GRANT_SHARDS = "grant_use_shards"

MAX_HEAD_BUCKETS = 4096
MAX_DIRECTORY_SHARDS = 32
"""A commit that changes a striped record writes every copy: at 32, the largest
such commit (a standing grant made: its record, the actor's grant index with
its 32 copies, two heads, the layout check and three provenance checks) is
39 items, and two striped records changed together 69, below DynamoDB's 100."""

MAX_POLICY_SET_SHARDS = 96
"""The policy set is checked by every attempt of the table (at its approval and
at its dispatch marker), so it has copies of its own: the most one transaction
holds with the change's event, its head and the layout check (99 items)."""

MAX_DUE_BUCKETS = 1024
SETTING_DUE_BUCKETS_MAX = 256
"""The most ``LEDGER_DUE_WORK_BUCKETS`` allows: a table that records no count may
hold entries in any bucket below it (each process wrote with its own setting,
which no migration can see), so the first count recorded is at least this."""

DEFAULT_HEAD_BUCKETS = 512
DEFAULT_DIRECTORY_SHARDS = 16
DEFAULT_POLICY_SET_SHARDS = 96
DEFAULT_DUE_BUCKETS = 256
"""6 index writes per attempt land in its bucket: 256 x 1,000 / 6 = 42,666
attempts/s before a bucket's partition is full (bench/CAPACITY.md)."""


@dataclass(frozen=True)
class TableLayout:
    head_buckets: int
    directory_shards: int
    checks_shards: bool
    version: int = 0  # 0: no layout item (a table made before it)
    policy_set_shards: int = 0
    due_buckets: int = 0  # 0: not recorded (each process's LEDGER_DUE_WORK_BUCKETS)
    grant_shards: int = 0  # 0: standing grants count their uses on their own record

    def __post_init__(self) -> None:
        if not 1 <= self.head_buckets <= MAX_HEAD_BUCKETS:
            raise ValueError(f"head buckets must be between 1 and {MAX_HEAD_BUCKETS}")
        if not 0 <= self.directory_shards <= MAX_DIRECTORY_SHARDS:
            raise ValueError(f"directory shards must be between 0 and {MAX_DIRECTORY_SHARDS}")
        if not 0 <= self.policy_set_shards <= MAX_POLICY_SET_SHARDS:
            raise ValueError(f"policy set shards must be between 0 and {MAX_POLICY_SET_SHARDS}")
        if self.checks_shards and not (self.directory_shards and self.policy_set_shards):
            raise ValueError("checks on shards need at least one shard of each kind")
        if not 0 <= self.due_buckets <= MAX_DUE_BUCKETS:
            raise ValueError(f"due buckets must be between 1 and {MAX_DUE_BUCKETS}")
        if not 0 <= self.grant_shards <= MAX_USE_SHARDS:
            raise ValueError(f"grant use shards must be between 0 and {MAX_USE_SHARDS}")

    def due_bucket_count(self, setting: int) -> int:
        """The due buckets every process uses: the recorded count, or (a table that
        records none) the process's own ``LEDGER_DUE_WORK_BUCKETS``."""
        return self.due_buckets or setting

    def shards_of(self, record_id: str) -> int:
        """How many copies a striped record has (the policy set has its own count)."""
        if record_id.startswith(POLICY_SET_PREFIX):
            return self.policy_set_shards
        return self.directory_shards

    def head_bucket(self, stream_id: str) -> str:
        return it.head_bucket(stream_id, self.head_buckets)

    def shard_for(self, seed: str, record_id: str = "") -> int:
        """The copy of ``record_id`` a commit checks: chosen by its own first stream id."""
        digest = hashlib.sha256(seed.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.shards_of(record_id)


LEGACY = TableLayout(head_buckets=16, directory_shards=0, checks_shards=False)
"""A table made before the layout record."""

NEW_TABLE = TableLayout(
    DEFAULT_HEAD_BUCKETS,
    DEFAULT_DIRECTORY_SHARDS,
    checks_shards=True,
    version=1,
    policy_set_shards=DEFAULT_POLICY_SET_SHARDS,
    due_buckets=DEFAULT_DUE_BUCKETS,
    grant_shards=DEFAULT_USE_SHARDS,
)
"""What ``create_table`` records on a new table (nothing to fill in yet)."""


def layout_key() -> it.Item:
    return {it.PK: {"S": LAYOUT_PK}, it.SK: {"N": "0"}}


def shard_key(record_id: str, shard: int) -> it.Item:
    return {it.PK: {"S": f"{record_id}{SHARD_SEPARATOR}{shard:02d}"}, it.SK: {"N": "0"}}


def shard_item(record_id: str, shard: int, version: int, recorded_at: str) -> it.Item:
    return {
        **shard_key(record_id, shard),
        it.VERSION: {"N": str(version)},
        it.RECORDED_AT: {"S": recorded_at},
    }


def layout_item(layout: TableLayout, recorded_at: str) -> it.Item:
    item: it.Item = {
        **layout_key(),
        HEAD_BUCKETS: {"N": str(layout.head_buckets)},
        DIRECTORY_SHARDS: {"N": str(layout.directory_shards)},
        POLICY_SET_SHARDS: {"N": str(layout.policy_set_shards)},
        DIRECTORY_CHECKS: {"S": "shard" if layout.checks_shards else "slot"},
        LAYOUT_VERSION: {"N": str(layout.version)},
        it.RECORDED_AT: {"S": recorded_at},
    }
    if layout.due_buckets:
        item[DUE_BUCKETS] = {"N": str(layout.due_buckets)}
    if layout.grant_shards:
        item[GRANT_SHARDS] = {"N": str(layout.grant_shards)}
    return item


def parse_layout(item: dict[str, Any] | None) -> TableLayout:
    if item is None:
        return LEGACY
    return TableLayout(
        head_buckets=int(item[HEAD_BUCKETS]["N"]),
        directory_shards=int(item[DIRECTORY_SHARDS]["N"]),
        checks_shards=item[DIRECTORY_CHECKS]["S"] == "shard",
        version=int(item.get(LAYOUT_VERSION, {"N": "1"})["N"]),
        policy_set_shards=int(item.get(POLICY_SET_SHARDS, {"N": "0"})["N"]),
        due_buckets=int(item.get(DUE_BUCKETS, {"N": "0"})["N"]),
        grant_shards=int(item.get(GRANT_SHARDS, {"N": "0"})["N"]),
    )


def layout_unchanged_check(table_name: str, layout: TableLayout) -> dict[str, Any]:
    """The condition a commit that changes a striped record carries: the table's
    shard count is still the one the commit wrote copies for (so a migration
    that adds shards can never miss a change made by a process that had not
    seen it yet)."""
    if layout.version == 0:
        return {
            "TableName": table_name,
            "Key": layout_key(),
            "ConditionExpression": "attribute_not_exists(#pk) OR (#s = :s AND #p = :p)",
            "ExpressionAttributeNames": {
                "#pk": it.PK,
                "#s": DIRECTORY_SHARDS,
                "#p": POLICY_SET_SHARDS,
            },
            "ExpressionAttributeValues": {":s": {"N": "0"}, ":p": {"N": "0"}},
        }
    return {
        "TableName": table_name,
        "Key": layout_key(),
        "ConditionExpression": "#s = :s AND #p = :p",
        "ExpressionAttributeNames": {"#s": DIRECTORY_SHARDS, "#p": POLICY_SET_SHARDS},
        "ExpressionAttributeValues": {
            ":s": {"N": str(layout.directory_shards)},
            ":p": {"N": str(layout.policy_set_shards)},
        },
    }
