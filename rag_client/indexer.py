"""Clients of rag.indexer.v1.Indexer (unary RPCs): blocking and asyncio.

Which calls are retried on UNAVAILABLE:
- `stats` only reads: retried.
- `upsert` and `delete` with `dry_run=True` only plan: retried.
- `upsert` and `delete` that write are NOT retried: after UNAVAILABLE the
  client cannot know whether the server applied them. Re-sending the same
  documents is harmless (unchanged documents plan as `unchanged`), so a caller
  may retry such a call itself after checking with a dry run or `stats`.

The streaming calls `upsert_stream` and `verify` yield progress messages,
the last one carrying the result; they are never retried (messages already
handed over would be repeated), and their deadline covers the whole stream,
so give a large batch a deadline to match.

- `sync` removes the documents of a scope that are not listed: retried only
  when `dry_run`, like any call that writes.
- `record_release` stores a release-check record with the index: not retried
  (it writes)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator

from rag_client.base import AsyncClient, DeadlineArg, SyncClient
from rag_client.requests import not_one_string
from rag_client.settings import ClientSettings
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc

Document = ipb.Document


def _upsert(documents: Iterable[Document], dry_run: bool) -> ipb.UpsertRequest:
    if isinstance(documents, Document | str | bytes):
        # Protobuf's own words were "'Document' object is not iterable" (probe).
        kind = type(documents).__name__
        raise TypeError(f"documents: expected a list of Document, got one {kind}")
    return ipb.UpsertRequest(documents=list(documents), dry_run=dry_run)


def _delete(doc_ids: Iterable[str], locale: str, dry_run: bool) -> ipb.DeleteRequest:
    not_one_string("doc_ids", doc_ids)
    return ipb.DeleteRequest(doc_ids=list(doc_ids), locale=locale, dry_run=dry_run)


def _sync(
    scope_id: str, keep: Iterable[ipb.DocumentKey], dry_run: bool, no_sync_since: int | None
) -> ipb.SyncRequest:
    request = ipb.SyncRequest(scope_id=scope_id, keep=list(keep), dry_run=dry_run)
    if no_sync_since is not None:
        request.no_sync_since = no_sync_since
    return request


class IndexerClient(SyncClient):
    """Blocking client of the Indexer."""

    SERVICE = "Indexer"
    ENV_NAME = "indexer"

    def __init__(self, settings: ClientSettings | str) -> None:
        super().__init__(settings)
        self._stub = indexer_pb2_grpc.IndexerStub(self._channel)

    def stats(self, *, deadline: DeadlineArg = None) -> ipb.StatsResponse:
        """Counts of documents and chunks (admin role)."""
        request = ipb.StatsRequest()
        return self._unary("Stats", self._stub.Stats, request, deadline, idempotent=True)

    def upsert(
        self, documents: Iterable[Document], *, dry_run: bool = False, deadline: DeadlineArg = None
    ) -> ipb.UpsertResponse:
        """Add or update documents (writer role); retried only when dry_run."""
        request = _upsert(documents, dry_run)
        return self._unary("Upsert", self._stub.Upsert, request, deadline, idempotent=dry_run)

    def delete(
        self,
        doc_ids: Iterable[str],
        *,
        locale: str = "",
        dry_run: bool = False,
        deadline: DeadlineArg = None,
    ) -> ipb.DeleteResponse:
        """Remove documents (writer role); retried only when dry_run."""
        request = _delete(doc_ids, locale, dry_run)
        return self._unary("Delete", self._stub.Delete, request, deadline, idempotent=dry_run)

    def sync(
        self,
        scope_id: str,
        keep: Iterable[ipb.DocumentKey],
        *,
        dry_run: bool = False,
        deadline: DeadlineArg = None,
        no_sync_since: int | None = None,
    ) -> ipb.UpsertResponse:
        """Remove the scope's documents not in `keep` (writer role); retried only
        when dry_run. `no_sync_since`: the `committed_generation` of this sync's
        first Upsert reply; Aborted (nothing removed) when another Sync of the
        scope committed since."""
        request = _sync(scope_id, keep, dry_run, no_sync_since)
        return self._unary("Sync", self._stub.Sync, request, deadline, idempotent=dry_run)

    def record_release(
        self, request: ipb.RecordReleaseRequest, *, deadline: DeadlineArg = None
    ) -> ipb.RecordReleaseResponse:
        """Store a release-check record with the index (admin role); not retried."""
        return self._unary(
            "RecordRelease", self._stub.RecordRelease, request, deadline, idempotent=False
        )

    def upsert_stream(
        self, documents: Iterable[Document], *, dry_run: bool = False, deadline: DeadlineArg = None
    ) -> Iterator[ipb.UpsertProgress]:
        """Upsert with progress (writer role): UpsertProgress messages, the
        last one with `result` set."""
        request = _upsert(documents, dry_run)
        return self._stream("UpsertStream", self._stub.UpsertStream, request, deadline)

    def verify(
        self, *, repair: bool = False, deadline: DeadlineArg = None
    ) -> Iterator[ipb.VerifyProgress]:
        """Audit the stores against the manifest (admin role): VerifyProgress
        messages, the last one with `report` set."""
        request = ipb.VerifyRequest(repair=repair)
        return self._stream("Verify", self._stub.Verify, request, deadline)


class AsyncIndexerClient(AsyncClient):
    """The asyncio counterpart of IndexerClient (same methods, awaited)."""

    SERVICE = "Indexer"
    ENV_NAME = "indexer"

    def __init__(self, settings: ClientSettings | str) -> None:
        super().__init__(settings)
        self._stub = indexer_pb2_grpc.IndexerStub(self._channel)

    async def stats(self, *, deadline: DeadlineArg = None) -> ipb.StatsResponse:
        request = ipb.StatsRequest()
        return await self._unary("Stats", self._stub.Stats, request, deadline, idempotent=True)

    async def upsert(
        self, documents: Iterable[Document], *, dry_run: bool = False, deadline: DeadlineArg = None
    ) -> ipb.UpsertResponse:
        request = _upsert(documents, dry_run)
        return await self._unary("Upsert", self._stub.Upsert, request, deadline, idempotent=dry_run)

    async def delete(
        self,
        doc_ids: Iterable[str],
        *,
        locale: str = "",
        dry_run: bool = False,
        deadline: DeadlineArg = None,
    ) -> ipb.DeleteResponse:
        request = _delete(doc_ids, locale, dry_run)
        return await self._unary("Delete", self._stub.Delete, request, deadline, idempotent=dry_run)

    async def sync(
        self,
        scope_id: str,
        keep: Iterable[ipb.DocumentKey],
        *,
        dry_run: bool = False,
        deadline: DeadlineArg = None,
        no_sync_since: int | None = None,
    ) -> ipb.UpsertResponse:
        request = _sync(scope_id, keep, dry_run, no_sync_since)
        return await self._unary("Sync", self._stub.Sync, request, deadline, idempotent=dry_run)

    async def record_release(
        self, request: ipb.RecordReleaseRequest, *, deadline: DeadlineArg = None
    ) -> ipb.RecordReleaseResponse:
        return await self._unary(
            "RecordRelease", self._stub.RecordRelease, request, deadline, idempotent=False
        )

    def upsert_stream(
        self, documents: Iterable[Document], *, dry_run: bool = False, deadline: DeadlineArg = None
    ) -> AsyncIterator[ipb.UpsertProgress]:
        """`async for progress in client.upsert_stream(docs)`."""
        request = _upsert(documents, dry_run)
        return self._stream("UpsertStream", self._stub.UpsertStream, request, deadline)

    def verify(
        self, *, repair: bool = False, deadline: DeadlineArg = None
    ) -> AsyncIterator[ipb.VerifyProgress]:
        request = ipb.VerifyRequest(repair=repair)
        return self._stream("Verify", self._stub.Verify, request, deadline)
