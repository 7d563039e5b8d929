"""A synthetic corpus of any size made of real chunks (bench.scale.source).

How a synthetic document is made, deterministically from one seed:

- **Source.** It copies one real document: the next one of a seeded
  permutation of the English (SciFact) documents, re-shuffled at every pass,
  or, with probability `zh_share`, a Chinese page. It has that document's
  number of chunks, title and heading paths, and a new id (`syn0000042-<id>`),
  so chunk ids come from the Indexer's own `chunk_id` and never repeat.
- **Vectors.** Each chunk's vector is its real chunk's vector moved towards
  one of that chunk's `partners` nearest real neighbours (weight uniform in
  [0, `mix_max`]) plus isotropic Gaussian noise, then L2-normalised. The noise
  is calibrated, not chosen: its scale is set so that the median cosine
  between a synthetic chunk and its real source equals the median cosine
  between a real chunk and the nearest chunk of another real document. A
  copy is a different document on the same subject, as far from its source
  as real documents are from their closest neighbours: the corpus gets
  denser the way a bigger collection on the same subjects does, without
  clumps of near-duplicates that would make HNSW artificially easy.
- **Text.** The real chunk's text with its last sentence replaced by a
  sentence of the partner chunk: every word is real text, the vocabulary and
  term statistics are SciFact's (and the Chinese pages'), and copies of one
  chunk are not identical strings.
- **Scope.** Drawn from a Zipf distribution over `scopes` scopes (exponent
  `scope_skew`): a few large sections and a long tail, as in a documentation
  hub. The filter benchmark uses the scope whose expected share is closest to
  `filter_share` (1%); its realised share is counted while writing.
- **Locale.** `en` for SciFact copies, `zh-CN` for the Chinese pages' copies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from bench.scale.source import SourceCorpus, SourceDocument
from services.core.models import Chunk
from services.indexer.identity import chunk_id, content_hash

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
_CALIBRATION_SAMPLE = 2000


@dataclass(frozen=True)
class CorpusSpec:
    chunks: int
    seed: int = 7
    scopes: int = 100
    scope_skew: float = 1.0
    filter_share: float = 0.01
    zh_share: float = 0.1
    partners: int = 10
    mix_max: float = 0.5
    noise: float | None = None  # None: calibrated (module docstring)


@dataclass
class SyntheticDocument:
    doc_id: str
    title: str
    locale: str
    scope_id: str
    chunks: list[Chunk] = field(default_factory=list)
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))


def zipf_shares(scopes: int, skew: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, scopes + 1) ** skew
    return np.asarray(weights / weights.sum())


def scope_name(rank: int) -> str:
    return f"section-{rank:03d}"


def sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(text) if part.strip()]


def nearest_neighbours(vectors: np.ndarray, groups: np.ndarray, k: int) -> np.ndarray:
    """Each row's `k` most similar other rows of the same group (cosine),
    computed in blocks so 12k x 12k never sits in memory at once."""
    neighbours = np.zeros((len(vectors), k), dtype=np.int64)
    for group in np.unique(groups):
        rows = np.flatnonzero(groups == group)
        kk = min(k, len(rows) - 1)
        for start in range(0, len(rows), 2048):
            block = rows[start : start + 2048]
            sims = vectors[block] @ vectors[rows].T
            sims[np.arange(len(block)), start + np.arange(len(block))] = -np.inf  # not itself
            best = np.argpartition(-sims, kk - 1, axis=1)[:, :kk] if kk > 0 else None
            picked = rows[best] if best is not None else block[:, None]
            neighbours[block] = np.resize(picked, (len(block), k)) if kk < k else picked
    return neighbours


def nearest_other_document_cosine(
    vectors: np.ndarray, owners: np.ndarray, sample: np.ndarray
) -> np.ndarray:
    """For each sampled row, the cosine to its most similar row of another
    document (a document's own chunks overlap, so they would say little)."""
    sims = vectors[sample] @ vectors.T
    sims[owners[sample][:, None] == owners[None, :]] = -np.inf
    return np.asarray(sims.max(axis=1))


def perturbed(
    own: np.ndarray, partner: np.ndarray, rng: np.random.Generator, mix_max: float, noise: float
) -> np.ndarray:
    """Rows moved towards their partners, plus noise of norm ~`noise`, unit length."""
    weight = rng.uniform(0.0, mix_max, size=(len(own), 1)).astype(np.float32)
    jitter = rng.standard_normal(own.shape).astype(np.float32) * (noise / np.sqrt(own.shape[1]))
    mixed = (1.0 - weight) * own + weight * partner + jitter
    return np.asarray(mixed / np.linalg.norm(mixed, axis=1, keepdims=True), dtype=np.float32)


class SyntheticCorpus:
    """`spec.chunks` chunks built from `source`, in documents, deterministically."""

    def __init__(self, source: SourceCorpus, spec: CorpusSpec) -> None:
        self.source, self.spec = source, spec
        self.locales = source.chunk_locales()
        self.partners = nearest_neighbours(source.vectors, self.locales, spec.partners)
        self.scope_shares = zipf_shares(spec.scopes, spec.scope_skew)
        rank = int(np.argmin(np.abs(self.scope_shares - spec.filter_share)))
        self.filter_scope = scope_name(rank + 1)
        self.filter_expected_share = float(self.scope_shares[rank])
        self.neighbour_cosine = self._real_neighbour_cosine()
        self.noise = spec.noise if spec.noise is not None else self._calibrated_noise()

    def _real_neighbour_cosine(self) -> float:
        rng = np.random.default_rng(self.spec.seed)
        size = min(_CALIBRATION_SAMPLE, len(self.source.vectors))
        sample = rng.choice(len(self.source.vectors), size=size, replace=False)
        owners = self.source.chunk_documents()
        return float(np.median(nearest_other_document_cosine(self.source.vectors, owners, sample)))

    def source_cosine(self, noise: float, seed: int = 0) -> float:
        """Median cosine between synthetic chunks and their sources at `noise`."""
        rng = np.random.default_rng(seed)
        rows = rng.choice(len(self.source.vectors), size=_CALIBRATION_SAMPLE)
        own = self.source.vectors[rows]
        partner = self.source.vectors[self.partners[rows, rng.integers(0, self.spec.partners)]]
        made = perturbed(own, partner, rng, self.spec.mix_max, noise)
        return float(np.median(np.sum(made * own, axis=1)))

    def _calibrated_noise(self) -> float:
        """Bisection: the noise at which a copy is as close to its source as a
        real chunk is to its nearest other-document chunk (cosine falls with noise)."""
        low, high = 0.0, 4.0
        for _ in range(30):
            middle = (low + high) / 2
            if self.source_cosine(middle) > self.neighbour_cosine:
                low = middle
            else:
                high = middle
        return round((low + high) / 2, 4)

    def documents(self) -> Iterator[SyntheticDocument]:
        rng = np.random.default_rng(self.spec.seed)
        english = [d for d in self.source.documents if d.locale == "en"]
        chinese = [d for d in self.source.documents if d.locale != "en"]
        order: list[int] = []
        made = 0
        number = 0
        while made < self.spec.chunks:
            if chinese and rng.random() < self.spec.zh_share:
                source = chinese[int(rng.integers(len(chinese)))]
            else:
                if not order:
                    order = list(rng.permutation(len(english)))
                source = english[order.pop()]
            document = self._document(number, source, rng, self.spec.chunks - made)
            made += len(document.chunks)
            number += 1
            yield document

    def _document(
        self, number: int, source: SourceDocument, rng: np.random.Generator, room: int
    ) -> SyntheticDocument:
        doc_id = f"syn{number:07d}-{source.doc_id}"
        scope = scope_name(int(rng.choice(self.spec.scopes, p=self.scope_shares)) + 1)
        rows = np.arange(source.first_chunk, source.first_chunk + min(source.chunks, room))
        partner_rows = self.partners[rows, rng.integers(0, self.spec.partners, size=len(rows))]
        vectors = perturbed(
            self.source.vectors[rows],
            self.source.vectors[partner_rows],
            rng,
            self.spec.mix_max,
            self.noise,
        )
        document = SyntheticDocument(doc_id, source.title, source.locale, scope, vectors=vectors)
        for position, (row, partner) in enumerate(zip(rows, partner_rows, strict=True)):
            text = self._recombined(int(row), int(partner), rng)
            document.chunks.append(self._chunk(document, position, int(row), text))
        return document

    def _recombined(self, row: int, partner: int, rng: np.random.Generator) -> str:
        own = sentences(self.source.texts[row])
        other = sentences(self.source.texts[partner])
        if len(own) < 2 or not other:
            return self.source.texts[row]
        joiner = "" if self.locales[row] != "en" else " "
        return joiner.join([*own[:-1], other[int(rng.integers(len(other)))]])

    def _chunk(self, document: SyntheticDocument, position: int, row: int, text: str) -> Chunk:
        heading = self.source.headings[row]
        return Chunk(
            chunk_id=chunk_id(document.locale, document.doc_id, position),
            doc_id=document.doc_id,
            position=position,
            text=text,
            content_hash=content_hash(heading + "\n" + text),
            url=f"https://docs.example.com/{document.scope_id}/{document.doc_id}",
            title=document.title,
            heading_path=heading,
            scope_id=document.scope_id,
            locale=document.locale,
        )

    def describe(self) -> dict[str, object]:
        return {
            "spec": self.spec.__dict__,
            "source_documents": len(self.source.documents),
            "source_chunks": len(self.source.texts),
            "real_neighbour_cosine_median": round(self.neighbour_cosine, 4),
            "noise": self.noise,
            "source_cosine_median": round(self.source_cosine(self.noise, seed=1), 4),
            "filter_scope": self.filter_scope,
            "filter_expected_share": round(self.filter_expected_share, 5),
        }
