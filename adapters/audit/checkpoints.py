"""Periodic checkpoints: a digest written outside the table at a fixed interval.

``ledger serve`` runs :class:`CheckpointLoop` when ``LEDGER_AUDIT_CHECKPOINT_DIR``
is set: one digest at start-up, then one every
``LEDGER_AUDIT_CHECKPOINT_INTERVAL_SECONDS``. The directory should be one the
ledger's writers cannot change afterwards (another machine, a write-once mount,
an object store with retention): a checkpoint is only as trustworthy as the
place it is kept. On AWS the scheduled checkpoint function writes to an S3
bucket with Object Lock instead (``adapters/aws_lambda/checkpoint.py``).

Before the first checkpoint of a start-up, the store is compared with the last
checkpoint in the directory (through the head index: a query, never every
event). A store behind it (streams cut short or missing, nothing else) is what
restoring an older backup leaves, whether or not the restore was recorded: the
restore is recorded then (``RestoreSource.CHECKPOINT``), so that the attempts
it may have lost are settled before anything is leased (I17). ``ledger serve``
takes this checkpoint before its worker starts.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from adapters.audit.digests import Behind, load_digest, restore_since, write_checkpoint
from adapters.settings import Settings
from adapters.store import LedgerStore
from adapters.system import SecretsTokenSource
from domain.ports import Clock
from domain.restore import RestoreSource
from domain.services.context import ServiceContext
from domain.services.restore import record_restore

log = logging.getLogger(__name__)


@dataclass
class CheckpointLoop:
    """Writes a digest now and then every ``interval`` seconds until stopped."""

    settings: Settings
    store: LedgerStore
    clock: Clock
    directory: str
    interval: float
    stop_event: threading.Event = field(default_factory=threading.Event)
    written: list[Path] = field(default_factory=list)
    compared: bool = False  # the store was compared with the last checkpoint
    restore: str | None = None  # the restore that comparison recorded, if any
    _thread: threading.Thread | None = None

    def run_once(self, *, raise_errors: bool = False) -> Path | None:
        """One checkpoint; a failure is logged (by error type) and retried next time,
        or raised (``raise_errors``: at start-up a bad key or directory must stop it).
        The first one of a process looks for a restore first (the module's text)."""
        if not self.written and not self.compared:
            self.compared = True
            try:
                self.restore = detect_restore(self.settings, self.store, self.clock, self.directory)
            except Exception as exc:  # a bad last checkpoint must not stop the ledger
                log.error(
                    "comparing the store with the last checkpoint failed: %s", type(exc).__name__
                )
        try:
            path = write_checkpoint(self.settings, self.store, self.clock, self.directory)
        except Exception as exc:  # the loop must outlive a store or disk hiccup
            if raise_errors:
                raise
            log.error("audit checkpoint failed: %s", type(exc).__name__)
            return None
        self.written.append(path)
        log.info("audit checkpoint written: %s", path.name)
        return path

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.run_once()

    def start(self) -> None:
        """Checkpoints every ``interval`` seconds from now on (the first is the caller's)."""
        self._thread = threading.Thread(target=self._loop, name="audit-checkpoints", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout)


def latest_checkpoint(directory: str) -> Path | None:
    """The newest checkpoint in ``directory`` (their names sort by time)."""
    folder = Path(directory)
    if not folder.is_dir():
        return None
    found = sorted(folder.glob("digest-*.json"))
    return found[-1] if found else None


def detect_restore(
    settings: Settings, store: LedgerStore, clock: Clock, directory: str
) -> str | None:
    """Record a restore when the store is behind the last checkpoint; its id, or None.

    Behind: some streams of the checkpoint have fewer events in the head index
    now, or none, and no stream has another head at the same version (that would
    be a rewrite, which no restore explains: logged, not recorded). Nothing is
    recorded twice: a restore recorded since the checkpoint covers it.
    """
    path = latest_checkpoint(directory)
    if path is None:
        return None
    digest = load_digest(str(path))
    if digest.ledger != settings.ledger_id:
        return None  # another ledger's checkpoint: nothing to compare
    now = {head.stream_id: head for head in store.stream_heads()}
    truncated: list[tuple[str, int, int]] = []
    missing: list[tuple[str, int]] = []
    for head in digest.heads:
        current = now.get(head.stream_id)
        if current is None:
            missing.append((head.stream_id, head.version))
        elif current.version < head.version:
            truncated.append((head.stream_id, head.version, current.version))
        elif current.version == head.version and current.head != head.head:
            log.error(
                "the store does not extend the last checkpoint %s: stream %s was rewritten; "
                "run `ledger audit verify --digest` on it",
                path.name,
                head.stream_id,
            )
            return None
    if not truncated and not missing:
        return None
    behind = Behind(digest.created_at, tuple(truncated), tuple(missing))
    if restore_since(store, digest) is not None:
        return None  # recorded already (ledger restore, or an earlier start)
    ctx = ServiceContext(store=store, clock=clock, tokens=SecretsTokenSource(), permissions=())
    restore_id = record_restore(ctx, source=RestoreSource.CHECKPOINT, lost=behind.summary())
    log.warning(
        "the store is behind the last checkpoint %s (%s): restore %s recorded; attempts "
        "unsettled in it are treated as possibly dispatched",
        path.name,
        behind.message(),
        restore_id,
    )
    return restore_id


def checkpoint_loop(settings: Settings, store: LedgerStore, clock: Clock) -> CheckpointLoop | None:
    """The loop the settings ask for, or None when checkpoints are off."""
    if not settings.audit_checkpoint_dir:
        return None
    return CheckpointLoop(
        settings,
        store,
        clock,
        settings.audit_checkpoint_dir,
        float(settings.audit_checkpoint_interval_seconds),
    )
