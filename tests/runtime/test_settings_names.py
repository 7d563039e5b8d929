"""One variable, one meaning: `services.stack` runs the Indexer and the
Retriever in one process, and every service reads the same environment, so a
`RAG_*` variable two services read must mean one thing to both.

Probe: `RAG_MAX_CHUNKS_PER_DOCUMENT` was the Indexer's chunking steps per
document (default 10,000) and the Retriever's hits per document (2, at most
100): 3 hits a page made the Indexer reject every page over 3 steps, and a
budget of 20,000 kept the stack from starting."""

from __future__ import annotations

import itertools

import pytest
from pydantic_settings import BaseSettings

from gateway.settings import GatewaySettings
from services.indexer.settings import IndexerSettings
from services.reranker.settings import RerankerSettings
from services.retriever.settings import RetrieverSettings

pytestmark = pytest.mark.unit

SERVICES: tuple[type[BaseSettings], ...] = (
    IndexerSettings,
    RetrieverSettings,
    RerankerSettings,
    GatewaySettings,
)


@pytest.mark.parametrize(
    ("first", "second"),
    list(itertools.combinations(SERVICES, 2)),
    ids=lambda cls: cls.__name__,
)
def test_a_variable_two_services_read_has_one_type_default_and_bounds(
    first: type[BaseSettings], second: type[BaseSettings]
) -> None:
    shared = sorted(set(first.model_fields) & set(second.model_fields))
    differing = [
        name
        for name in shared
        if (a := first.model_fields[name], b := second.model_fields[name])
        and (a.annotation, a.default, a.metadata) != (b.annotation, b.default, b.metadata)
    ]
    assert not differing, f"read otherwise by {first.__name__} and {second.__name__}: {differing}"


def test_the_indexer_budget_and_the_retriever_cap_are_two_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_MAX_CHUNKS_PER_DOCUMENT", "3")
    monkeypatch.setenv("RAG_MAX_CHUNKING_STEPS", "20000")
    assert IndexerSettings().max_chunking_steps == 20_000
    assert RetrieverSettings().max_chunks_per_document == 3
