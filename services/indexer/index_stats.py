"""What the Stats RPC reports: the index's sizes and records, each read
from the store that holds it within the call's deadline."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from services.core.deadline import Deadline
from services.indexer.document_encoders import recorded_document_encoders
from services.indexer.pipeline import LAST_RUN_META, IndexingPipeline
from services.storage.visibility import committed_generation


@dataclass(frozen=True)
class IndexStats:
    documents: int
    chunks: int
    chunks_by_locale: dict[str, int]
    vectors: int
    lexical_rows: int
    chunking: dict[str, Any]
    last_run: dict[str, int]
    committed_generation: int
    pending_documents: int
    document_encoders: list[str]


def collect_stats(pipeline: IndexingPipeline, deadline: Deadline) -> IndexStats:
    """Every read within `deadline` (the Stats RPC's)."""
    manifest = pipeline.manifest
    by_locale = manifest.chunk_counts_by_locale(deadline)
    return IndexStats(
        committed_generation=committed_generation(manifest, deadline),
        pending_documents=len(manifest.open_intents(deadline)),
        documents=manifest.count(deadline),
        chunks=sum(by_locale.values()),
        chunks_by_locale=by_locale,
        vectors=pipeline.vectors.count(None, deadline),
        lexical_rows=pipeline.storage.lexical.count(None, deadline),
        chunking=json.loads(manifest.get_meta("chunking", deadline) or "{}"),
        last_run=json.loads(manifest.get_meta(LAST_RUN_META, deadline) or "{}"),
        document_encoders=recorded_document_encoders(manifest, deadline),
    )
