"""The real material the synthetic scale corpus is made of.

SciFact's corpus chunked exactly as the Indexer chunks it (the operator CLI's
BEIR options: title as the heading), the Chinese pages of the bilingual data
set chunked the same way, and the SciFact test queries; every chunk and query
embedded once by the service's own `Embedder` (fp32, the packaged model, the
text the Indexer embeds: heading path + chunk). The result is cached in
bench/cache, keyed by everything that would change it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bench.common.paths import CACHE_DIR, DATASETS_DIR, SHARED_DATASETS
from services.core.models import Document
from services.indexer.chunking import Chunker, ChunkingParams
from services.indexer.planning import document_chunks
from services.sources.loaders import LoadError, load_beir_jsonl, load_directory
from services.storage.storage import embedding_text

if TYPE_CHECKING:
    from services.embedding.embedder import Embedder

SCIFACT = SHARED_DATASETS / "scifact"
CHINESE_PAGES = DATASETS_DIR / "bilingual" / "pages" / "zh-CN"
# Bump when what is cached changes shape.
_FORMAT = "1"


@dataclass(frozen=True)
class SourceDocument:
    doc_id: str
    title: str
    locale: str
    first_chunk: int  # index into SourceCorpus.texts
    chunks: int


@dataclass
class SourceCorpus:
    """Real chunks (texts, heading paths, vectors) grouped by real document."""

    documents: list[SourceDocument]
    texts: list[str]
    headings: list[str]
    vectors: np.ndarray  # (chunks, dim) float32, unit length
    query_ids: list[str]
    query_texts: list[str]
    query_vectors: np.ndarray  # (queries, dim)

    def chunk_documents(self) -> np.ndarray:
        """The index of each chunk's document in `documents`."""
        owners = np.empty(len(self.texts), dtype=np.int64)
        for number, doc in enumerate(self.documents):
            owners[doc.first_chunk : doc.first_chunk + doc.chunks] = number
        return owners

    def chunk_locales(self) -> np.ndarray:
        locales = np.empty(len(self.texts), dtype=object)
        for doc in self.documents:
            locales[doc.first_chunk : doc.first_chunk + doc.chunks] = doc.locale
        return locales


def _loaded(items: Iterable[object]) -> list[Document]:
    return [item for item in items if not isinstance(item, LoadError)]  # type: ignore[misc]


def real_documents(
    limit: int = 0, scifact: Path = SCIFACT, chinese: Path = CHINESE_PAGES
) -> list[Document]:
    """SciFact's documents (the first `limit`; 0: all) and the Chinese pages."""
    english = load_beir_jsonl(scifact / "corpus.jsonl", scope_id="source", title_as_heading=True)
    pages = load_directory(chinese, scope_id="source", locale="zh-CN")
    kept = islice(english, limit) if limit else english
    return _loaded(kept) + _loaded(pages)


def scifact_test_queries(scifact: Path = SCIFACT) -> list[tuple[str, str]]:
    with (scifact / "queries-test.jsonl").open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    return [(str(r["_id"]), str(r["text"])) for r in records]


def cache_key(model: str, params: ChunkingParams, limit: int, scifact: Path = SCIFACT) -> str:
    inputs = [_FORMAT, model, json.dumps(params.as_dict(), sort_keys=True)]
    if limit:  # the full corpus keeps the key it always had
        inputs.append(f"limit:{limit}")
    for path in (scifact / "corpus.jsonl", scifact / "queries-test.jsonl"):
        inputs.append(f"{path.name}:{path.stat().st_size}")
    for page in sorted(CHINESE_PAGES.rglob("*")):
        if page.is_file():
            inputs.append(hashlib.sha256(page.read_bytes()).hexdigest()[:16])
    return hashlib.sha256("|".join(inputs).encode()).hexdigest()[:16]


def load_source(model: str, limit: int = 0, cache_dir: Path = CACHE_DIR) -> SourceCorpus:
    """The source corpus, embedded on first use (all of SciFact, ~12.5k
    chunks: about 5 minutes on two cores) and read from the cache afterwards.
    `limit`: only the first SciFact documents (smoke runs)."""
    params = ChunkingParams()
    path = cache_dir / f"scale-source-{cache_key(model, params, limit)}.npz"
    if path.exists():
        return _read(path)
    corpus = _build(model, params, limit)
    _write(path, corpus)
    return corpus


def _build(model: str, params: ChunkingParams, limit: int) -> SourceCorpus:
    from services.embedding.config import EmbedderConfig
    from services.embedding.embedder import Embedder

    embedder = Embedder(
        EmbedderConfig(model=model, onnx_cache_dir=CACHE_DIR / "models", query_cache_size=0)
    )
    print("embedding the source chunks and queries (once; cached in bench/cache)", flush=True)
    documents = real_documents(limit)
    return embed_source(documents, scifact_test_queries(), embedder, Chunker(params))


def embed_source(
    documents: Iterable[Document],
    queries: Sequence[tuple[str, str]],
    embedder: Embedder,
    chunker: Chunker,
) -> SourceCorpus:
    """Chunk `documents` as the Indexer does and embed chunks and queries."""
    sources: list[SourceDocument] = []
    texts: list[str] = []
    headings: list[str] = []
    embed_texts: list[str] = []
    for doc in documents:
        chunks = document_chunks(chunker, doc)
        if not chunks:
            continue
        sources.append(SourceDocument(doc.doc_id, doc.title, doc.locale, len(texts), len(chunks)))
        texts += [c.text for c in chunks]
        headings += [c.heading_path for c in chunks]
        embed_texts += [embedding_text(c) for c in chunks]
    query_vectors = np.stack([embedder.embed_query(text) for _, text in queries])
    return SourceCorpus(
        sources,
        texts,
        headings,
        embedder.embed_documents(embed_texts).astype(np.float32),
        [qid for qid, _ in queries],
        [text for _, text in queries],
        query_vectors.astype(np.float32),
    )


def _write(path: Path, corpus: SourceCorpus) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "documents": [doc.__dict__ for doc in corpus.documents],
        "texts": corpus.texts,
        "headings": corpus.headings,
        "query_ids": corpus.query_ids,
        "query_texts": corpus.query_texts,
    }
    tmp = path.with_suffix(".tmp.npz")
    np.savez(
        tmp,
        vectors=corpus.vectors,
        query_vectors=corpus.query_vectors,
        meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
    )
    tmp.replace(path)


def _read(path: Path) -> SourceCorpus:
    with np.load(path) as data:
        meta = json.loads(data["meta"].tobytes().decode())
        return SourceCorpus(
            [SourceDocument(**doc) for doc in meta["documents"]],
            meta["texts"],
            meta["headings"],
            data["vectors"],
            meta["query_ids"],
            meta["query_texts"],
            data["query_vectors"],
        )
