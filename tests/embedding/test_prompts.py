"""Query and passage prompts: where they come from, and that the Embedder
applies them (a real model: the prompt changes the vector and the ranking)."""

from __future__ import annotations

import numpy as np
import pytest

from services.core.errors import ConfigError
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder
from services.embedding.prompts import EmbeddingPrompts, declared_prompts, resolve_prompts


@pytest.mark.unit
@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ({"query": "query: ", "passage": "passage: "}, EmbeddingPrompts("query: ", "passage: ")),
        ({"query": "q: ", "document": "d: "}, EmbeddingPrompts("q: ", "d: ")),
        ({"search_query": "search_query: "}, EmbeddingPrompts("search_query: ", "")),
        ({"classification": "c: "}, EmbeddingPrompts()),
        ({}, EmbeddingPrompts()),
    ],
)
def test_a_models_declared_prompts_are_read_by_side(
    declared: dict[str, str], expected: EmbeddingPrompts
) -> None:
    assert declared_prompts(declared) == expected
    assert resolve_prompts("model", declared) == expected


@pytest.mark.unit
def test_conventions_and_explicit_prompts() -> None:
    assert resolve_prompts("e5", {}) == EmbeddingPrompts("query: ", "passage: ")
    assert resolve_prompts("bge", {}).query.startswith("Represent this sentence")
    assert resolve_prompts("bge", {}).passage == ""
    assert resolve_prompts("none", {"query": "query: "}) == EmbeddingPrompts()
    explicit = resolve_prompts("e5", {}, query="Q: ", passage=None)
    assert explicit == EmbeddingPrompts("Q: ", "passage: ")
    with pytest.raises(ConfigError, match="RAG_EMBEDDING_PROMPTS='e6'"):
        resolve_prompts("e6", {})  # type: ignore[arg-type]


@pytest.mark.unit
def test_prompts_are_put_before_each_text() -> None:
    prompts = EmbeddingPrompts("query: ", "passage: ")
    assert prompts.for_queries(["a", "b"]) == ["query: a", "query: b"]
    assert prompts.for_passages(["c"]) == ["passage: c"]
    assert EmbeddingPrompts().for_queries(["a"]) == ["a"]


@pytest.mark.integration
def test_a_prompt_changes_the_vector_and_the_identity(embedder: Embedder) -> None:
    prompted = Embedder(EmbedderConfig(backend="torch", query_prompt="query: "))
    question = "how many requests per minute before a 429"
    plain, with_prompt = embedder.embed_query(question), prompted.embed_query(question)
    assert float(np.dot(plain, with_prompt)) < 0.999
    assert np.allclose(with_prompt, embedder.embed_documents(["query: " + question])[0], atol=1e-5)
    assert prompted.identity.query_prompt == "query: "
    assert not prompted.identity.compatible_with(embedder.identity)
    assert embedder.identity.query_prompt == embedder.identity.passage_prompt == ""
