"""An example executor plugin: ``notes.append`` writes one JSON line per effect.

The "provider" is a file named by the environment variable
``LEDGER_EXAMPLE_NOTES_FILE``. The executor deduplicates by the attempt's
idempotency key itself (a retry with the same key finds the first line and
returns its receipt), so its delivery mode is ``provider_idempotency``.

The ledger finds it through the entry point declared in pyproject.toml:

    [project.entry-points."execution_ledger.executors"]
    example-notes = "ledger_example_plugin:executors"
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.executors.digest import build_digest, code_identity
from domain.directory import DeliveryMode
from domain.errors import ExecutorNoEffect, ExecutorOutcomeUncertain
from domain.ports import ExecutionReceipt, ExecutionRequest

NOTES_VARIABLE = "LEDGER_EXAMPLE_NOTES_FILE"
# What a spec's content must look like (JSON Schema, Draft 2020-12): propose
# refuses anything else with a 422 naming the field, so execute never sees it.
CONTENT_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 2000}},
    "required": ["text"],
}


class NotesExecutor:
    """Appends ``content["text"]`` to the notes file, at most once per key."""

    capability = "notes.append"
    delivery_mode = DeliveryMode.PROVIDER_IDEMPOTENCY
    content_schema = CONTENT_SCHEMA

    def __init__(self, path: Path) -> None:
        self.path = path
        # Code identity: this module's source. Configuration: the *name* of the
        # variable that says where notes go, never a machine's path, and the
        # content schema (a changed schema is a new build).
        self.build_digest = build_digest(
            code_identity(sys.modules[__name__]),
            {
                "kind": "example-notes",
                "notes_file": f"env:{NOTES_VARIABLE}",
                "content_schema": CONTENT_SCHEMA,
            },
        )

    def execute(self, request: ExecutionRequest) -> ExecutionReceipt:
        text = request.spec.content.get("text")
        if not isinstance(text, str) or not text:
            raise ExecutorNoEffect(reason_code="notes_text_missing")  # nothing written
        with self.path.open("a+", encoding="utf-8") as notes:
            fcntl.flock(notes, fcntl.LOCK_EX)
            notes.seek(0)
            count = 0
            for line in notes:
                count += 1
                row = json.loads(line)
                if row["key"] == request.idempotency_key:
                    return ExecutionReceipt(self._receipt(row))
            if datetime.now(UTC) >= request.deadline:
                raise ExecutorOutcomeUncertain()  # the deadline passed: write nothing
            row = {"key": request.idempotency_key, "number": count + 1, "text": text}
            notes.write(json.dumps(row) + "\n")
            notes.flush()
            os.fsync(notes.fileno())
        return ExecutionReceipt(self._receipt(row))

    @staticmethod
    def _receipt(row: dict[str, Any]) -> dict[str, Any]:
        # A receipt carries safe ids and hashes only: never the note itself.
        return {
            "note_number": row["number"],
            "note_hash": "sha256:" + hashlib.sha256(row["text"].encode()).hexdigest(),
        }


def executors(settings: Any) -> list[NotesExecutor]:
    """The factory the entry point names: receives the ledger's settings."""
    path = os.environ.get(NOTES_VARIABLE)
    if not path:
        raise RuntimeError(f"{NOTES_VARIABLE} is not set")
    return [NotesExecutor(Path(path))]
