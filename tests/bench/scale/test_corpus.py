"""The synthetic scale corpus: deterministic, distinct ids, the promised
distributions, and vectors calibrated against the real corpus."""

from __future__ import annotations

from collections import Counter
from itertools import islice

import numpy as np
import pytest

from bench.scale.corpus import CorpusSpec, SyntheticCorpus, sentences, zipf_shares
from bench.scale.source import SourceCorpus
from services.indexer.identity import chunk_id

# integration: the source corpus is embedded by the real model
pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=23)]


def _chunks(corpus: SyntheticCorpus) -> list:
    return [chunk for document in corpus.documents() for chunk in document.chunks]


def test_same_seed_same_corpus_other_seed_another(small_source: SourceCorpus) -> None:
    first = list(SyntheticCorpus(small_source, CorpusSpec(chunks=3000, seed=3)).documents())
    again = list(SyntheticCorpus(small_source, CorpusSpec(chunks=3000, seed=3)).documents())
    other = list(SyntheticCorpus(small_source, CorpusSpec(chunks=3000, seed=4)).documents())
    assert [d.doc_id for d in first] == [d.doc_id for d in again]
    assert [c.text for d in first for c in d.chunks] == [c.text for d in again for c in d.chunks]
    assert all(np.array_equal(a.vectors, b.vectors) for a, b in zip(first, again, strict=True))
    assert [d.doc_id for d in first] != [d.doc_id for d in other]


def test_exact_size_and_distinct_indexer_ids(small_source: SourceCorpus) -> None:
    chunks = _chunks(SyntheticCorpus(small_source, CorpusSpec(chunks=5000)))
    assert len(chunks) == 5000
    assert len({c.chunk_id for c in chunks}) == 5000
    assert all(c.chunk_id == chunk_id(c.locale, c.doc_id, c.position) for c in chunks)
    # Copies of one real document are distinct documents.
    assert len({c.doc_id for c in chunks}) > len(small_source.documents)


def test_scope_and_locale_distributions(small_source: SourceCorpus) -> None:
    corpus = SyntheticCorpus(small_source, CorpusSpec(chunks=40_000))
    documents = list(corpus.documents())
    scopes = Counter(d.scope_id for d in documents)
    shares = zipf_shares(100, 1.0)
    assert corpus.filter_expected_share == pytest.approx(0.01, abs=0.001)
    assert scopes[corpus.filter_scope] / len(documents) == pytest.approx(0.01, abs=0.004)
    assert scopes.most_common(1)[0][1] / len(documents) == pytest.approx(shares[0], abs=0.02)
    assert len(scopes) > 90  # a long tail, not a handful of scopes
    chinese = sum(d.locale == "zh-CN" for d in documents) / len(documents)
    assert chinese == pytest.approx(0.1, abs=0.02)
    assert {d.locale for d in documents} == {"en", "zh-CN"}


def test_vectors_are_unit_and_calibrated_to_real_neighbours(small_source: SourceCorpus) -> None:
    corpus = SyntheticCorpus(small_source, CorpusSpec(chunks=2000))
    vectors = np.concatenate([d.vectors for d in corpus.documents()])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert 0 < corpus.noise < 4
    # A copy is as close to its source as real chunks are to their nearest neighbour.
    assert corpus.source_cosine(corpus.noise, seed=5) == pytest.approx(
        corpus.neighbour_cosine, abs=0.01
    )
    # Not near-duplicates of the source: no copy is the source vector itself.
    assert not np.any(np.isclose(vectors @ small_source.vectors.T, 1.0, atol=1e-6))


def test_texts_are_real_sentences_recombined(small_source: SourceCorpus) -> None:
    corpus = SyntheticCorpus(small_source, CorpusSpec(chunks=2000))
    real = {sentence for text in small_source.texts for sentence in sentences(text)}
    chunks = list(islice(_chunks(corpus), 2000))
    assert all(set(sentences(c.text)) <= real for c in chunks)
    changed = sum(c.text not in set(small_source.texts) for c in chunks)
    assert changed > len(chunks) / 2
