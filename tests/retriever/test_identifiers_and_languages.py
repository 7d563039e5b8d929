"""Exact identifiers, Chinese and mixed queries, and match highlights through
the real Retrieve RPC (real stores, real model, hybrid unless stated).

The corpus is written here, with distractors built to beat plain RRF: pages
that talk about "text embedding" or "chunk size" at length without naming the
identifier, and near-miss codes (`4290`, `text-embedding-v3`)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

PAGES = {
    ("en", "models.md"): "# Embedding models\n\n## Current model\n\nNew projects should use "
    "text-embedding-v4: 1024 dimensions, multilingual input.\n\n## Older model\n\n"
    "text-embedding-v3 remains available until the end of the year.",
    ("en", "embedding-guide.md"): "# Text embedding guide\n\nText embedding turns text into "
    "vectors. Good text embedding models embed text so that similar text lands close; "
    "embedding text in batches makes embedding faster.",
    ("en", "limits.md"): "# Rate limits\n\nEach key may send 60 requests per minute. Above "
    "that the API answers HTTP 429 Too Many Requests; wait for the Retry-After seconds.",
    ("en", "errors.md"): "# Error codes\n\nCode 4290 means the monthly quota is spent. "
    "503 means the service is overloaded; retry with backoff.",
    ("en", "chunking.md"): "# Chunking\n\nSet chunkSize=800 and chunkOverlap=200 in the "
    "indexer configuration.",
    ("en", "chunk-sizes.md"): "# Choosing a chunk size\n\nA chunk size that is too small "
    "loses context; a chunk size too large dilutes it. Chunk size and chunk overlap trade "
    "recall against precision, so test your chunk size.",
    ("zh-CN", "limits.md"): "# 限流\n\n每个 API 密钥每分钟最多发送 60 个请求，超出后接口返回 "
    "429 错误，请按照 Retry-After 头等待后重试。",
    (
        "zh-CN",
        "billing.md",
    ): "# 计费\n\n按调用次数计费，每月一号结算上个月的费用，发票在结算后三个工作日内开具。",
    ("zh-CN", "chunking.md"): "# 分块\n\n文档写入索引前会被切分成片段，默认每段 800 个字符，"
    "可以通过 chunkSize 调整，相邻片段之间的重叠由 chunkOverlap 控制。",
}


def documents() -> list[ipb.Document]:
    return [
        ipb.Document(
            doc_id=f"{locale}/{name}",
            url=f"https://docs.example/{locale}/{name}",
            title=text.splitlines()[0].lstrip("# "),
            locale=locale,
            scope_id="hub",
            text=text,
        )
        for (locale, name), text in PAGES.items()
    ]


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(
        tmp_path_factory.mktemp("identifiers"), embedder, indexer={"allowed_locales": ""}
    ).start()
    stack.upsert(documents())
    yield stack
    stack.stop()


def top(stack: BackgroundStack, query: str, **fields) -> rpb.RetrieveResponse:
    return stack.retrieve(query, debug=True, disable_rerank=True, **fields)


@pytest.mark.parametrize(
    ("query", "identifier"),
    [
        ("text-embedding-v4", "text-embedding-v4"),
        ("chunkSize=800", "chunkSize=800"),
        ("how do I set chunkSize=800 for long pages", "chunkSize=800"),
        ("is text-embedding-v3 still available", "text-embedding-v3"),
        ("what does status 429 mean", "429"),
    ],
)
def test_the_chunk_holding_the_identifier_ranks_first(stack, query, identifier) -> None:
    reply = top(stack, query)
    first = reply.hits[0]
    assert identifier.lower() in first.text.lower()
    assert list(first.exact_identifiers) == [identifier.lower()]
    assert any(note.startswith("exact identifier precedence") for note in reply.debug.notes)


def test_a_near_miss_code_is_not_an_exact_match(stack) -> None:
    reply = top(stack, "429", top_k=20)
    holders = {h.doc_id for h in reply.hits if h.exact_identifiers}
    assert holders == {"en/limits.md", "zh-CN/limits.md"}  # not en/errors.md's 4290
    assert reply.hits[0].doc_id in holders


def test_chinese_question_uses_the_lexical_channel_alone(stack) -> None:
    reply = top(stack, "每个月什么时候结算费用")
    assert reply.hits[0].doc_id == "zh-CN/billing.md"
    assert reply.query_language == "zh"
    vector = next(c for c in reply.debug.channels if c.channel == rpb.CHANNEL_VECTOR)
    assert vector.status == rpb.CHANNEL_STATUS_SKIPPED and "reads en" in vector.error
    assert list(reply.degraded) == []  # a decision, not a failure
    assert any("vector channel left out" in note for note in reply.debug.notes)
    assert all(c.channel == rpb.CHANNEL_LEXICAL for h in reply.hits for c in h.channels)


@pytest.mark.parametrize(
    ("query", "doc_id"),
    [
        ("每分钟能发多少个请求", "zh-CN/limits.md"),
        ("文档怎么切分", "zh-CN/chunking.md"),
        ("发票什么时候开", "zh-CN/billing.md"),
    ],
)
def test_chinese_questions_find_their_page_first(stack, query, doc_id) -> None:
    reply = top(stack, query)
    assert reply.hits[0].doc_id == doc_id
    lexical = next(c for c in reply.debug.channels if c.channel == rpb.CHANNEL_LEXICAL)
    assert lexical.hits > 0


def test_chinese_sentence_with_an_english_identifier(stack) -> None:
    reply = top(stack, "chunkSize 的默认值是多少")
    assert reply.hits[0].doc_id == "zh-CN/chunking.md"
    assert list(reply.hits[0].exact_identifiers) == ["chunksize"]


def test_english_sentence_with_a_chinese_term(stack) -> None:
    reply = top(stack, "what does 限流 mean", channels=[rpb.CHANNEL_LEXICAL])
    assert reply.hits[0].doc_id == "zh-CN/limits.md"
    hybrid = top(stack, "what does 限流 mean")
    assert hybrid.query_language == "en"
    assert "zh-CN/limits.md" in [h.doc_id for h in hybrid.hits[:3]]


def test_a_scope_in_an_unread_language_leaves_the_vector_channel_out(stack) -> None:
    reply = top(stack, "rate limits", filter=rpb.ScopeFilter(locale="zh-CN"))
    vector = next(c for c in reply.debug.channels if c.channel == rpb.CHANNEL_VECTOR)
    assert vector.status == rpb.CHANNEL_STATUS_SKIPPED
    assert "scope's locale" in vector.error


def test_query_language_can_be_given(stack) -> None:
    reply = top(stack, "限流", query_language="en")
    assert reply.query_language == "en"
    vector = next(c for c in reply.debug.channels if c.channel == rpb.CHANNEL_VECTOR)
    assert vector.status == rpb.CHANNEL_STATUS_OK
    with pytest.raises(grpc.RpcError) as bad:
        top(stack, "限流", query_language="zh CN!")
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "query_language" in (bad.value.details() or "")


def test_an_unknown_intent_is_the_callers_mistake(stack) -> None:
    with pytest.raises(grpc.RpcError) as bad:
        top(stack, "rate limits", intent=99)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "intent" in (bad.value.details() or "")


def test_highlights_mark_identifiers_and_terms(stack) -> None:
    reply = top(stack, "what does status 429 mean for requests")
    first = reply.hits[0]
    marked = [(first.text[s.start : s.end], s.identifier) for s in first.highlights]
    assert ("429", True) in marked
    assert any(text.lower().startswith("request") and not ident for text, ident in marked)
    starts = [s.start for s in first.highlights]
    assert starts == sorted(starts)


def test_highlights_mark_chinese_words(stack) -> None:
    reply = top(stack, "每个月什么时候结算费用")
    first = reply.hits[0]
    marked = {first.text[s.start : s.end] for s in first.highlights}
    assert "结算" in "".join(marked) and "费用" in "".join(marked)


@pytest.mark.parametrize("rule", ["tiers", "off"])
def test_the_precedence_rule_is_a_setting(tmp_path, embedder, rule) -> None:
    stack = BackgroundStack(tmp_path, embedder, retriever={"exact_precedence": rule}).start()
    try:
        stack.upsert(documents())
        reply = top(stack, "429", top_k=20)
        groups = [len(h.exact_identifiers) for h in reply.hits]
        fused = [h.fused_score for h in reply.hits]
        if rule == "tiers":  # every holder before every other hit
            assert groups == sorted(groups, reverse=True)
        else:  # plain RRF order
            assert fused == sorted(fused, reverse=True)
    finally:
        stack.stop()


def test_a_query_without_identifiers_keeps_the_rrf_order(stack) -> None:
    reply = top(stack, "how large should chunks be")
    assert not any(h.exact_identifiers for h in reply.hits)
    assert not any(n.startswith("exact identifier") for n in reply.debug.notes)
    scores = [h.fused_score for h in reply.hits]
    assert scores == sorted(scores, reverse=True)
