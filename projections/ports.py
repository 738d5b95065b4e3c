"""What projections need from storage: a small view store with version guards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ViewRecord:
    """One row of one view, tagged with the source stream version it reflects.

    ``list_pk``/``list_sk`` place it in a paginated list (e.g. attempts by
    status, oldest first); None keeps it out of every list.
    """

    name: str
    key: str
    version: int
    data: Mapping[str, Any]
    list_pk: str | None = None
    list_sk: str | None = None


class ViewStore(Protocol):
    """Stores views; a write never replaces a newer version (idempotent, ordered)."""

    def get_view(self, name: str, key: str) -> ViewRecord | None: ...

    def put_view(self, record: ViewRecord, *, force: bool = False) -> bool:
        """Write if the stored version is older (or absent), or always with ``force``
        (a rebuild); True when written."""
        ...

    def list_views(
        self, list_pk: str, limit: int, cursor: str | None = None
    ) -> tuple[Sequence[ViewRecord], str | None]:
        """A page of a list in ``list_sk`` order, strictly after ``cursor``."""
        ...
