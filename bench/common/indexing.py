"""Documents into the Indexer of a running stack, through its RPCs: a BEIR
corpus exactly as the operator CLI sends it, or loaded documents synced into
one scope; and the index's own statistics."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.clients import bench_indexer
from services.core.models import Document


@dataclass(frozen=True)
class IngestReport:
    seconds: float
    counts: dict[str, int]
    rejected: list[str]

    @property
    def documents(self) -> int:
        return sum(self.counts[k] for k in ("unchanged", "metadata_only", "changed", "added"))

    @property
    def reused(self) -> bool:
        """The index already held exactly this corpus: nothing was written."""
        unchanged = self.counts["unchanged"] == self.documents
        return self.documents > 0 and unchanged and not self.counts.get("removed", 0)


def ingest_beir(
    indexer_addr: str, corpus: Path, scope: str, *, title_as_heading: bool
) -> IngestReport:
    """Send a BEIR corpus through the Indexer exactly as the operator CLI does
    (same loader, options and batching), timing the whole run."""
    from services.operator.cli import parser
    from services.operator.ingest import Ingest

    argv = ["ingest", str(corpus), "--scope", scope, "--format", "beir", "--quiet"]
    args = parser().parse_args(argv + (["--title-as-heading"] if title_as_heading else []))
    with bench_indexer(indexer_addr, args.timeout) as client:
        ingest = Ingest(client, args)
        started = time.perf_counter()
        ingest.run()
        seconds = time.perf_counter() - started
    return IngestReport(round(seconds, 2), dict(ingest.totals), list(ingest.rejected))


def sync_documents(
    indexer_addr: str, documents: Sequence[Document], scope: str, *, timeout_s: float = 600
) -> IngestReport:
    """Make `scope` hold exactly `documents`: Upsert them in the CLI's bounded
    batches, then Sync keeping what was sent, so a reused index also loses the
    pages a data set no longer has (a renamed page would otherwise still be
    found under its old id and count as a miss)."""
    from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as pb
    from services.operator.ingest import batches, document_to_proto

    totals = dict.fromkeys((f.name for f in pb.PlanCounts.DESCRIPTOR.fields), 0)
    rejected: list[str] = []

    def add(reply: pb.UpsertResponse) -> None:
        for name in totals:
            totals[name] += getattr(reply.counts, name)
        rejected.extend(
            f"{o.doc_id}: {o.error}"
            for o in reply.outcomes
            if o.state == pb.DOCUMENT_STATE_REJECTED
        )

    keep = [pb.DocumentKey(doc_id=d.doc_id, locale=d.locale) for d in documents]
    with bench_indexer(indexer_addr, timeout_s) as client:
        started = time.perf_counter()
        for batch in batches(documents, 64, 4_000_000):
            add(client.upsert([document_to_proto(d) for d in batch]))
        add(client.sync(scope, keep))
        seconds = time.perf_counter() - started
    return IngestReport(round(seconds, 2), totals, rejected)


def index_stats(indexer_addr: str) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    with bench_indexer(indexer_addr, 60.0) as client:
        reply = client.stats()
    return MessageToDict(
        reply, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
