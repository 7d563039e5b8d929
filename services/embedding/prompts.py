"""The text an embedding model expects before a query and before a passage.

Models trained with prompts lose quality without them: e5 wants `query: ` and
`passage: `, bge an instruction before the query only; sentence-transformers
models declare theirs in `config_sentence_transformers.json` (`prompts`,
`default_prompt_name`). The Embedder prepends them itself, so the torch and
the ONNX paths embed exactly the same strings, and the index records them
next to the model's weights: vectors made with other prompts are not
comparable, and a change is refused like a change of model.

Sources (RAG_EMBEDDING_PROMPTS): `model` (default) takes what the model
declares (none for all-MiniLM-L6-v2); `e5` and `bge` apply those families'
conventions to a model whose folder declares none; `none` turns prompts off.
RAG_EMBEDDING_QUERY_PROMPT / RAG_EMBEDDING_PASSAGE_PROMPT set either side
explicitly and win over the source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from services.core.errors import ConfigError

PromptSource = Literal["model", "e5", "bge", "none"]

# Keys sentence-transformers models use for each side, best first.
_QUERY_KEYS = ("query", "search_query", "retrieval.query")
_PASSAGE_KEYS = ("passage", "document", "corpus", "search_document", "retrieval.passage")
_BGE_QUERY = "Represent this sentence for searching relevant passages: "


@dataclass(frozen=True)
class EmbeddingPrompts:
    query: str = ""
    passage: str = ""

    def for_queries(self, texts: list[str]) -> list[str]:
        return [self.query + text for text in texts] if self.query else texts

    def for_passages(self, texts: list[str]) -> list[str]:
        return [self.passage + text for text in texts] if self.passage else texts

    def describe(self) -> str:
        return f"query prompt {self.query!r}, passage prompt {self.passage!r}"


CONVENTIONS: Mapping[str, EmbeddingPrompts] = {
    "e5": EmbeddingPrompts("query: ", "passage: "),
    "bge": EmbeddingPrompts(_BGE_QUERY, ""),
    "none": EmbeddingPrompts(),
}


def resolve_prompts(
    source: PromptSource,
    declared: Mapping[str, str] | None,
    query: str | None = None,
    passage: str | None = None,
) -> EmbeddingPrompts:
    """The prompts to use: `declared` (the model's `prompts`) for `model`, a
    convention otherwise; explicit `query`/`passage` (not None) override."""
    if source == "model":
        base = declared_prompts(declared or {})
    elif source in CONVENTIONS:
        base = CONVENTIONS[source]
    else:
        raise ConfigError(f"RAG_EMBEDDING_PROMPTS={source!r}: use model, e5, bge or none")
    return EmbeddingPrompts(
        base.query if query is None else query,
        base.passage if passage is None else passage,
    )


def declared_prompts(prompts: Mapping[str, str]) -> EmbeddingPrompts:
    """A sentence-transformers `prompts` mapping read as (query, passage)."""
    return EmbeddingPrompts(_first(prompts, _QUERY_KEYS), _first(prompts, _PASSAGE_KEYS))


def model_prompts(model: Any) -> dict[str, str]:
    """What a loaded SentenceTransformer declares (`{}` if nothing)."""
    prompts = getattr(model, "prompts", None) or {}
    return {str(k): str(v) for k, v in prompts.items() if v}


def _first(prompts: Mapping[str, str], keys: tuple[str, ...]) -> str:
    return next((prompts[key] for key in keys if prompts.get(key)), "")
