"""The second vector's model (RAG_CROSS_LINGUAL_MODEL) as the fan-out weighs
it: which languages it reads, and so where its channel runs
(services.retriever.fan_out)."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.analysis.scripts import primary_language
from services.core.models import ScoredChunk
from services.embedding.embedder import Embedder
from services.retriever.language import LanguageRule


@dataclass(frozen=True)
class SecondModel:
    """What the second vector's model reads, and so where its channel runs: a
    model of several languages crosses them; one of a single language
    (packaged:bge-small-en) is a second voice for that language's questions
    over that language's pages."""

    embedder: Embedder
    reads: LanguageRule

    @classmethod
    def of(cls, embedder: Embedder) -> SecondModel:
        return cls(embedder, LanguageRule(embedder.languages))

    @property
    def crosses(self) -> bool:
        return len(self.reads.model_languages) != 1 or "*" in self.reads.model_languages

    def unread(self, question_language: str, locales: tuple[str, ...]) -> str:
        """Why a one-language model's channel is left out ("" where it runs);
        `locales`: those the request's scope holds, where known."""
        read = "/".join(sorted(self.reads.model_languages))
        if not self.reads.reads(question_language):
            return f"the second model reads {read} only; the question reads as {question_language}"
        if locales and not self.pages(locales):
            return f"the second model reads {read} only; the scope holds {', '.join(locales)}"
        return ""

    def reads_page(self, hit: ScoredChunk) -> bool:
        """Whether the model reads the hit's page (one without a locale: yes)."""
        return self.crosses or self.reads.reads(primary_language(hit.chunk.locale))

    def pages(self, locales: tuple[str, ...]) -> tuple[str, ...]:
        """The locales whose pages it reads (a crossing model: all)."""
        if self.crosses:
            return locales
        return tuple(loc for loc in locales if self.reads.reads(primary_language(loc)))
