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

Field weights: a title match says more about a chunk than a body match, and
the heading path sits in between, so title ×2.0, heading_path ×1.5, text ×1.0.
Per-field scores are summed (like Lucene's classic multi-field parser).
"""

from __future__ import annotations

from dataclasses import dataclass

import tantivy as tv

FIELD_BOOSTS: dict[str, float] = {"title": 2.0, "heading_path": 1.5, "text": 1.0}

# Bounds the work one request can cause; a real question has far fewer terms.
MAX_TERMS = 64
MAX_PHRASES = 16

# Must mirror tantivy's `en_stem` tokenizer used at index time.
_MAX_TOKEN_BYTES = 40


def en_stem_analyzer() -> tv.TextAnalyzer:
    return (
        tv.TextAnalyzerBuilder(tv.Tokenizer.simple())
        .filter(tv.Filter.remove_long(_MAX_TOKEN_BYTES))
        .filter(tv.Filter.lowercase())
        .filter(tv.Filter.stemmer("english"))
        .build()
    )


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

    def describe(self) -> str:
        """Lucene-like rendering for debug output (never parsed back)."""
        parts = [*self.terms, *(_phrase_text(p) for p in self.phrases)]
        body = " ".join(parts)
        return " ".join(f"{field}^{boost:g}:({body})" for field, boost in FIELD_BOOSTS.items())


def _phrase_text(phrase: tuple[PhraseWord, ...]) -> str:
    return '"' + " ".join(word for _, word in phrase) + '"'


class LexicalQueryBuilder:
    """Builds BM25 queries over the weighted text fields of a tantivy schema."""

    def __init__(self, schema: tv.Schema) -> None:
        self._schema = schema
        self._analyzer = en_stem_analyzer()

    def plan(self, text: str) -> QueryPlan:
        terms: dict[str, None] = {}  # dicts keep first-seen order, sets do not
        phrases: dict[tuple[PhraseWord, ...], None] = {}
        for piece in text.split():
            tokens = self._analyzer.pre_tokenize(piece).tokens
            for token in tokens:
                if len(terms) < MAX_TERMS:
                    terms.setdefault(token.text)
            if len(tokens) > 1 and len(phrases) < MAX_PHRASES:
                start = tokens[0].position
                phrases.setdefault(tuple((t.position - start, t.text) for t in tokens))
        return QueryPlan(terms=tuple(terms), phrases=tuple(phrases))

    def build(self, plan: QueryPlan) -> tv.Query:
        """A disjunction of every term and phrase in every weighted field."""
        clauses: list[tuple[tv.Occur, tv.Query]] = []
        for field, boost in FIELD_BOOSTS.items():
            for term in plan.terms:
                query = tv.Query.term_query(self._schema, field, term)
                clauses.append((tv.Occur.Should, tv.Query.boost_query(query, boost)))
            for phrase in plan.phrases:
                query = tv.Query.phrase_query(self._schema, field, list(phrase))
                clauses.append((tv.Occur.Should, tv.Query.boost_query(query, boost)))
        return tv.Query.boolean_query(clauses)
