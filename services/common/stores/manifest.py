"""The index manifest: what is indexed, per (doc_id, locale), with its hashes.

The manifest is written only after both stores accepted a document's writes,
so it never claims more than the stores hold. `Manifest` is the interface;
`SqliteManifest` (embedded mode) and a server-mode implementation fill it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ManifestEntry:
    doc_id: str
    locale: str
    scope_id: str
    content_hash: str  # hash of the document body
    metadata_hash: str  # hash of url/title/scope/metadata
    chunk_ids: tuple[str, ...]  # in position order
    chunk_hashes: tuple[str, ...]  # content hash per chunk, same order
    updated_at: str = ""


@runtime_checkable
class Manifest(Protocol):
    def get(self, doc_id: str, locale: str) -> ManifestEntry | None: ...

    def get_many(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], ManifestEntry]: ...

    def put_many(self, entries: Sequence[ManifestEntry]) -> None:
        """Insert or replace entries atomically (all or none) and clear their
        pending records."""
        ...

    def add_pending(self, pending: Mapping[tuple[str, str], Sequence[str]]) -> None:
        """Record, before any store write, which chunk ids a document is about
        to get. If the run dies before `put_many`, the next plan deletes these
        too, so an interrupted update can never leave orphan chunks."""
        ...

    def get_pending(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], set[str]]:
        """Chunk ids recorded by `add_pending` and not yet committed."""
        ...

    def delete_many(self, keys: Sequence[tuple[str, str]]) -> None:
        """Remove entries and their pending records atomically."""
        ...

    def keys_in_scope(self, scope_id: str) -> Iterable[tuple[str, str]]: ...

    def locales_of(self, doc_id: str) -> list[str]: ...

    def count(self) -> int: ...

    def chunk_counts_by_locale(self) -> dict[str, int]: ...

    def get_meta(self, key: str) -> str | None:
        """Index-level values (chunking parameters, last run's counts)."""
        ...

    def set_meta(self, key: str, value: str) -> None: ...

    def close(self) -> None: ...
