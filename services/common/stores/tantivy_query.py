"""Turns raw user text into a tantivy query without ever using query syntax.

The text is never handed to tantivy's query parser, so quotes, parentheses,
`AND`/`OR`/`NOT`, `field:` prefixes, wildcards, fuzziness (`~`), boosts (`^`)
and brackets are plain characters: the analyzer below drops them like any other
punctuation. Each whitespace-separated piece is analyzed with the same chain
as tantivy's built-in `en_stem` tokenizer (simple tokenizer, tokens over 40
bytes removed, lowercase, English Snowball stemmer), so query terms equal
indexed terms.

A piece that splits into several tokens is an identifier such as
`text-embedding-v4` or `chunkSize=800`: it contributes a phrase over its
sub-tokens (exact identifier wins) plus each sub-token as a term (a near
miss such as `text-embedding-v3` still scores).

Field weights (default): title ×2.0, heading_path ×1.5, text ×1.0 — on a
site, a page title or section heading names what the chunk is about, so a
match there says more than one in the body. Per-field BM25 scores are summed
(like Lucene's classic multi-field parser); that sum already favours short
fields, so the boosts should stay modest. They are a corpus property, hence
`field_boosts`: on SciFact *train* (5,183 abstracts, lexical only, nDCG@10)
title ×0.5 scores 0.688, ×1.0 0.671, ×1.5 0.646, ×2.0 0.622 — scientific titles
are a weak signal there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import tantivy as tv

from services.common.errors import ConfigError

FIELD_BOOSTS: dict[str, float] = {"title": 2.0, "heading_path": 1.5, "text": 1.0}

# Bounds the work one request can cause; a real question has far fewer terms.
MAX_TERMS = 64
MAX_PHRASES = 16

# Must mirror tantivy's `en_stem` tokenizer used at index time.
_MAX_TOKEN_BYTES = 40


def en_stem_analyzer(*, drop_stopwords: bool = False) -> tv.TextAnalyzer:
    builder = (
        tv.TextAnalyzerBuilder(tv.Tokenizer.simple())
        .filter(tv.Filter.remove_long(_MAX_TOKEN_BYTES))
        .filter(tv.Filter.lowercase())
    )
    if drop_stopwords:
        builder = builder.filter(tv.Filter.stopword("english"))
    return builder.filter(tv.Filter.stemmer("english")).build()


# A phrase word is (position relative to the first token, token): positions
# keep the gap where the tokenizer dropped an over-long token.
PhraseWord = tuple[int, str]


@dataclass(frozen=True)
class QueryPlan:
    """The analyzed query: single terms and identifier phrases, deduplicated."""

    terms: tuple[str, ...]
    phrases: tuple[tuple[PhraseWord, ...], ...]

    def is_empty(self) -> bool:
        return not self.terms and not self.phrases

    def body(self) -> str:
        words = [*self.terms, *(_phrase_text(p) for p in self.phrases)]
        return " ".join(words)


def _phrase_text(phrase: tuple[PhraseWord, ...]) -> str:
    return '"' + " ".join(word for _, word in phrase) + '"'


class LexicalQueryBuilder:
    """Builds BM25 queries over the weighted text fields of a tantivy schema.

    `drop_stopwords` leaves English stopwords out of the single terms (they
    stay inside identifier phrases, where position matters): their IDF is
    near zero, yet their long posting lists dominate the cost of a query.
    A query made only of stopwords keeps them, so it still finds something.
    """

    def __init__(
        self,
        schema: tv.Schema,
        *,
        field_boosts: Mapping[str, float] = FIELD_BOOSTS,
        drop_stopwords: bool = True,
    ) -> None:
        unknown = set(field_boosts) - set(FIELD_BOOSTS)
        if unknown or any(boost <= 0 for boost in field_boosts.values()):
            raise ConfigError(
                f"field boosts must be positive and name only {sorted(FIELD_BOOSTS)}: "
                f"got {dict(field_boosts)}"
            )
        self._schema = schema
        self._boosts = dict(field_boosts)
        self._analyzer = en_stem_analyzer()
        self._content_analyzer = en_stem_analyzer(drop_stopwords=True) if drop_stopwords else None

    def plan(self, text: str) -> QueryPlan:
        terms: dict[str, None] = {}  # dicts keep first-seen order, sets do not
        stopword_terms: dict[str, None] = {}
        phrases: dict[tuple[PhraseWord, ...], None] = {}
        for piece in text.split():
            tokens = self._analyzer.pre_tokenize(piece).tokens
            content = self._content_positions(piece)
            for token in tokens:
                kept = content is None or token.position in content
                bucket = terms if kept else stopword_terms
                if len(bucket) < MAX_TERMS:
                    bucket.setdefault(token.text)
            if len(tokens) > 1 and len(phrases) < MAX_PHRASES:
                start = tokens[0].position
                phrases.setdefault(tuple((t.position - start, t.text) for t in tokens))
        chosen = terms if terms or phrases else stopword_terms
        return QueryPlan(terms=tuple(chosen), phrases=tuple(phrases))

    def _content_positions(self, piece: str) -> set[int] | None:
        """Positions of the non-stopword tokens of `piece` (None: keep all)."""
        if self._content_analyzer is None:
            return None
        return {token.position for token in self._content_analyzer.pre_tokenize(piece).tokens}

    def describe(self, plan: QueryPlan) -> str:
        """Lucene-like rendering for debug output (never parsed back)."""
        if plan.is_empty():
            return "<empty>"
        body = plan.body()
        return " ".join(f"{field}^{boost:g}:({body})" for field, boost in self._boosts.items())

    def build(self, plan: QueryPlan) -> tv.Query:
        """A disjunction of every term and phrase in every weighted field."""
        clauses: list[tuple[tv.Occur, tv.Query]] = []
        for field, boost in self._boosts.items():
            for term in plan.terms:
                query = tv.Query.term_query(self._schema, field, term)
                clauses.append((tv.Occur.Should, tv.Query.boost_query(query, boost)))
            for phrase in plan.phrases:
                words: list[str | tuple[int, str]] = list(phrase)
                query = tv.Query.phrase_query(self._schema, field, words)
                clauses.append((tv.Occur.Should, tv.Query.boost_query(query, boost)))
        return tv.Query.boolean_query(clauses)
