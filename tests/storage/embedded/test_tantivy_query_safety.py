"""Raw user text against the tantivy store: never syntax, never an error."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core.analysis.analyzer import MAX_PHRASES, MAX_TERMS
from services.core.errors import ConfigError
from services.core.models import ScopeFilter
from services.storage.base import unrequested_deadline
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from services.storage.lexical_fields import FIELD_BOOSTS
from tests.storage.harness import StoreFactory
from tests.storage.query_safety import HOSTILE_QUERIES, LexicalQuerySafetyContract

pytestmark = pytest.mark.unit


class TestTantivyQuerySafety(LexicalQuerySafetyContract):
    @pytest.fixture
    def factory(self, embedded_lexical_factory: StoreFactory) -> StoreFactory:
        return embedded_lexical_factory


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    from tests.storage.query_safety import identifier_corpus

    store = TantivyLexicalStore(tmp_path_factory.mktemp("tantivy"))
    store.upsert(identifier_corpus(), deadline=unrequested_deadline())
    yield store
    store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.text(max_size=300))
def test_any_text_is_searchable_and_describable(store: TantivyLexicalStore, query: str) -> None:
    assert isinstance(
        store.search(query, 5, ScopeFilter(locale="en"), deadline=unrequested_deadline()), list
    )
    assert isinstance(store.describe_query(query), str)


def test_identifier_becomes_a_phrase_plus_its_terms(store: TantivyLexicalStore) -> None:
    description = store.describe_query("text-embedding-v4")
    assert 'text embed v4 "text embed v4"' in description
    assert all(f"{field}^" in description for field in FIELD_BOOSTS)


def test_syntax_characters_do_not_reach_the_description(store: TantivyLexicalStore) -> None:
    description = store.describe_query(HOSTILE_QUERIES["mixed-syntax"])
    # Only words survive; AND/OR/TO are ordinary (stop)words, not operators.
    assert description.startswith('title^0.5:(titl x y z 2 "titl x" "z 2") ')
    assert store.describe_query(HOSTILE_QUERIES["only-punctuation"]) == "<empty>"


def test_long_input_is_bounded(store: TantivyLexicalStore) -> None:
    words = " ".join(f"word{n} id-{n}-x" for n in range(500))
    plan_text = store.describe_query(words)
    per_field = plan_text.split(" heading_path^")[0]
    assert per_field.count('"') == 2 * MAX_PHRASES
    assert len(per_field.split()) <= MAX_TERMS + 3 * MAX_PHRASES + 1


def test_stopwords_are_dropped_unless_nothing_else_is_left(store: TantivyLexicalStore) -> None:
    assert store.describe_query("the gateway is in the cloud").startswith(
        "title^0.5:(gateway cloud) "
    )
    assert store.describe_query("to be or not").startswith("title^0.5:(to be or not) ")
    # Inside an identifier the stopword stays: it holds a position in the phrase.
    assert '"state of the art"' in store.describe_query("state-of-the-art")


def test_field_boosts_are_configurable(tmp_path) -> None:
    store = TantivyLexicalStore(tmp_path / "lexical", field_boosts={"title": 0.5, "text": 1.0})
    try:
        assert store.describe_query("gateway") == "title^0.5:(gateway) text^1:(gateway)"
    finally:
        store.close()
    with pytest.raises(ConfigError):
        TantivyLexicalStore(tmp_path / "other", field_boosts={"body": 1.0})
