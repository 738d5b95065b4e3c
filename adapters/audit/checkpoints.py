"""Periodic checkpoints: a digest written outside the table at a fixed interval.

``ledger serve`` runs :class:`CheckpointLoop` when ``LEDGER_AUDIT_CHECKPOINT_DIR``
is set: one digest at start-up, then one every
``LEDGER_AUDIT_CHECKPOINT_INTERVAL_SECONDS``. The directory should be one the
ledger's writers cannot change afterwards (another machine, a write-once mount,
an object store with retention): a checkpoint is only as trustworthy as the
place it is kept. On AWS the scheduled checkpoint function writes to an S3
bucket with Object Lock instead (``adapters/aws_lambda/checkpoint.py``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from adapters.audit.digests import write_checkpoint
from adapters.settings import Settings
from adapters.store import LedgerStore
from domain.ports import Clock

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
    _thread: threading.Thread | None = None

    def run_once(self, *, raise_errors: bool = False) -> Path | None:
        """One checkpoint; a failure is logged (by error type) and retried next time,
        or raised (``raise_errors``: at start-up a bad key or directory must stop it)."""
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
