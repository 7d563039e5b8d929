"""A small real source corpus for the scale bench's tests: the first SciFact
documents and the Chinese pages, chunked and embedded by the real model."""

from __future__ import annotations

from itertools import islice

import pytest

from bench.scale.source import (
    CHINESE_PAGES,
    SCIFACT,
    SourceCorpus,
    embed_source,
    scifact_test_queries,
)
from services.embedding.embedder import Embedder
from services.indexer.chunking import Chunker
from services.sources.loaders import LoadError, load_beir_jsonl, load_directory

# As tests/bench/test_smoke.py: CI clones the repository with shared/ beside it.
needs_scifact = pytest.mark.skipif(
    not (SCIFACT / "corpus.jsonl").is_file(),
    reason=f"SciFact not found at {SCIFACT} (the scale bench is made of it)",
)


@pytest.fixture(scope="session")
def small_source(embedder: Embedder) -> SourceCorpus:
    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found at {SCIFACT} (the scale bench is made of it)")
    english = islice(
        load_beir_jsonl(SCIFACT / "corpus.jsonl", scope_id="s", title_as_heading=True), 120
    )
    chinese = load_directory(CHINESE_PAGES, scope_id="s", locale="zh-CN")
    documents = [d for d in [*english, *chinese] if not isinstance(d, LoadError)]
    return embed_source(documents, scifact_test_queries()[:20], embedder, Chunker())
