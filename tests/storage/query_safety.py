"""Query-safety part of the lexical conformance suite.

`LexicalStore.search` receives raw user text. Whatever the text, it must
neither raise nor act as query syntax, and identifiers typed by developers
must find the chunk that contains them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.core.models import ScopeFilter
from services.storage.base import unrequested_deadline
from tests.storage.harness import StoreFactory, StoreHarness, make_chunk

HOSTILE_QUERIES: dict[str, str] = {
    "double-quote": '"',
    "unbalanced-quote": '"setting chunkSize',
    "quoted-phrase": '"gateway answers"',
    "open-paren": "(gateway OR",
    "close-paren": "gateway)",
    "boolean-words": "gateway AND NOT budget OR retry",
    "and-alone": "AND",
    "or-alone": "OR",
    "not-alone": "NOT",
    "field-prefix": "title:gateway",
    "field-prefix-unknown": "nosuchfield:gateway",
    "field-prefix-empty": "title:",
    "star": "*",
    "wildcard": "gate*",
    "question": "?",
    "single-char-wildcard": "gatew?y",
    "fuzzy": "~2",
    "fuzzy-term": "gateway~2",
    "boost": "^3",
    "boost-term": "gateway^3",
    "open-bracket": "[",
    "range": "[a TO z]",
    "open-brace": "{",
    "exclusive-range": "{a TO b}",
    "backslash": "\\",
    "escaped-quote": '\\"gateway\\"',
    "minus": "-",
    "minus-term": "-gateway",
    "plus": "+",
    "plus-term": "+gateway",
    "bang": "!",
    "double-ampersand": "gateway && budget",
    "double-pipe": "gateway || budget",
    "regex": "/gat.*/",
    "colon": ":",
    "only-punctuation": '"()[]{}:^~*?\\!+-',
    "empty": "",
    "whitespace": "   \t\n ",
    "emoji": "🔥 gateway 🚀",
    "nul-and-controls": "gate\x00way\x1b[0m",
    "right-to-left": "שלום gateway",
    "mixed-syntax": 'title:"x" AND (y OR z)^2~ -[a TO *] \\',
    "long-input": ("gateway (budget) OR title:x* " * 70)[:2000],
    "long-token": "g" * 2000,
}

# query -> doc_id of the chunk that must rank first
IDENTIFIER_CASES: dict[str, str] = {
    "chunkSize=800": "doc-chunksize",
    "text-embedding-v4": "doc-embedding",
    "429": "doc-429",
    "safeFetch": "doc-safefetch",
    "how do I set chunkSize=800?": "doc-chunksize",
    "is text-embedding-v4 supported": "doc-embedding",
    "text-embedding-v3": "doc-near-model",
    "safeFetch()": "doc-safefetch",
    "错误码 429 是什么意思": "doc-429",
}


def identifier_corpus() -> list:
    """Targets plus distractors that share some sub-tokens with them."""
    texts = {
        "doc-chunksize": "Set chunkSize=800 for long pages.",
        "doc-embedding": "We embed with text-embedding-v4 since May.",
        "doc-429": "The gateway answers 429 when the budget is spent.",
        "doc-safefetch": "Call safeFetch() to retry transient failures.",
        "doc-near-size": "The chunk size default is 500; 800 is the maximum page size.",
        "doc-near-model": "Older text embedding models: text-embedding-v3 and v2 text.",
        "doc-near-status": "Errors 500 and 503 mean: fetch again safely.",
    }
    return [make_chunk(doc_id, text=text, title="Notes") for doc_id, text in texts.items()]


class LexicalQuerySafetyContract:
    """Needs a `factory` fixture returning a lexical StoreFactory.

    Each test walks a whole table against one indexed store (opening a store
    per row would dominate the run time) and reports every failing row."""

    @pytest.fixture
    def indexed(self, factory: StoreFactory, tmp_path) -> Iterator[StoreHarness]:
        harness = StoreHarness.open(factory, tmp_path / "store")
        harness.upsert(identifier_corpus())
        yield harness
        harness.close()

    def test_hostile_input_never_raises(self, indexed: StoreHarness) -> None:
        failures = []
        for case, query in HOSTILE_QUERIES.items():
            try:
                hits = indexed.store.search(
                    query, 10, ScopeFilter(scope_id="site-a"), deadline=unrequested_deadline()
                )
            except Exception as exc:
                failures.append(f"{case}: raised {type(exc).__name__}: {exc}")
                continue
            if not isinstance(hits, list) or len(hits) > 10:
                failures.append(f"{case}: returned {hits!r}")
        assert failures == []

    def test_identifiers_find_their_chunk(self, indexed: StoreHarness) -> None:
        top = {query: _top_doc(indexed, query) for query in IDENTIFIER_CASES}
        assert top == IDENTIFIER_CASES

    def test_operators_are_plain_text(self, indexed: StoreHarness) -> None:
        top = {query: _top_doc(indexed, query) for query in OPERATOR_CASES}
        assert top == OPERATOR_CASES


# query -> doc_id of the first hit ("" = no hit at all)
OPERATOR_CASES: dict[str, str] = {
    "NOT gateway": "doc-429",  # NOT is a word, not an exclusion
    "-gateway": "doc-429",
    "title:gateway": "doc-429",  # no field restriction: "gateway" is only in text
    "gateway AND zyzzyva": "doc-429",  # AND does not require both
    "retr*": "",  # no wildcard expansion: the stem "retr" is not indexed
    "zyzzyva OR zyzzyvas": "",
}


def _top_doc(harness: StoreHarness, query: str) -> str:
    hits = harness.store.search(query, 10, ScopeFilter(), deadline=unrequested_deadline())
    return hits[0].chunk.doc_id if hits else ""
