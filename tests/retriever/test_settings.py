"""The Reranker's address is checked when the Retriever starts, by the rule
its client applies, not on the first call."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.retriever.settings import RetrieverSettings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("addr", ["reranker", "reranker:0", "reranker:port", "re ranker:50053"])
def test_a_malformed_reranker_address_is_refused_naming_the_variable(addr: str) -> None:
    with pytest.raises(ValidationError, match="RAG_RERANKER_ADDR"):
        RetrieverSettings(reranker_addr=addr)


@pytest.mark.parametrize("addr", ["", "reranker:50053", "dns:///reranker.rag:50053"])
def test_an_address_the_client_takes_or_none_is_accepted(addr: str) -> None:
    assert RetrieverSettings(reranker_addr=addr).reranker_addr == addr
