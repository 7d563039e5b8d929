"""Deterministic query/passage text for the reranker tests."""

from __future__ import annotations

import random

QUERY = "how does hybrid retrieval fuse lexical and vector rankings"

_WORDS = (
    "retrieval",
    "fusion",
    "ranking",
    "passage",
    "vector",
    "lexical",
    "deadline",
    "budget",
    "chunk",
    "overlap",
    "heading",
    "token",
    "reranker",
    "cross",
    "encoder",
    "score",
    "batch",
    "qdrant",
    "tantivy",
    "query",
    "document",
    "citation",
    "evidence",
    "latency",
    "throughput",
    "fallback",
    "cache",
    "index",
    "manifest",
)


def passages(count: int, chars: int = 400, seed: int = 7) -> list[str]:
    """`count` different passages of about `chars` characters each."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < chars:
            words.append(rng.choice(_WORDS))
        texts.append(" ".join(words)[:chars])
    return texts
