"""Turns an analyzed query plan into a tantivy query, never using query syntax.

Raw user text is never handed to tantivy's query parser: the shared analyzer
(`services.core.analysis`) turns it into terms, phrases and identifiers,
and each becomes a term, phrase or constant-score query object. Quotes,
`AND`/`OR`/`NOT`, `field:` prefixes, wildcards, `~`, `^` and brackets are
therefore plain characters that the analyzer drops like any punctuation.
Scoring is described in `lexical_fields`.
"""

from __future__ import annotations

from collections.abc import Mapping

import tantivy as tv

from services.core.analysis import QueryPlan
from services.storage.lexical_fields import (
    EXACT_BOOST,
    FIELD_BOOSTS,
    IDENTIFIERS_FIELD,
    check_field_boosts,
    terms_field,
)


class LexicalQueryBuilder:
    """Builds BM25 queries over the weighted term fields of a tantivy schema."""

    def __init__(self, schema: tv.Schema, field_boosts: Mapping[str, float] = FIELD_BOOSTS):
        self._schema = schema
        self._boosts = check_field_boosts(field_boosts)

    def build(self, plan: QueryPlan) -> tv.Query:
        """A disjunction of every term and phrase in every weighted field, and
        of every exact identifier."""
        clauses: list[tuple[tv.Occur, tv.Query]] = []
        for field, boost in self._boosts.items():
            name = terms_field(field)
            for term in plan.terms:
                query = tv.Query.term_query(self._schema, name, term)
                clauses.append((tv.Occur.Should, tv.Query.boost_query(query, boost)))
            for phrase in plan.phrases:
                words: list[str | tuple[int, str]] = list(phrase)
                query = tv.Query.phrase_query(self._schema, name, words)
                clauses.append((tv.Occur.Should, tv.Query.boost_query(query, boost)))
        for identifier in plan.identifiers:
            exact = tv.Query.term_query(
                self._schema, IDENTIFIERS_FIELD, identifier, index_option="basic"
            )
            clauses.append((tv.Occur.Should, tv.Query.const_score_query(exact, EXACT_BOOST)))
        return tv.Query.boolean_query(clauses)
