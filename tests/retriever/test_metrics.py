"""The Retriever's metrics, scraped from its real /metrics listener around
real Retrieve calls on the embedded stack (real stores and model): each
answer moves the counters and stage histograms the contract names
(tests/deploy/metrics_contract.py), with the same codes the gateway uses.
Faults are injected with the labelled test-only wrappers of tests/support."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client import CollectorRegistry

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from services.retriever.metrics import RetrievalMetrics, rerank_outcome
from services.retriever.reranking import RerankCode, RerankOutcome
from services.runtime.observability.telemetry import Telemetry
from tests.deploy.metrics_contract import CONTRACT, EXPORTED_BY, exposed_names
from tests.reranker.stack import start_reranked_stack
from tests.support.corpus import corpus_documents
from tests.support.faults import OK, RAISE, FaultySearch
from tests.support.faulty_stack import Faults
from tests.support.metrics import Scrape
from tests.support.stack import BackgroundStack, free_port
from tests.support.tiny_cross_encoder import build_tiny_cross_encoder

pytestmark = pytest.mark.integration

QUERIES = (
    "how do I restore the stores from snapshots",
    "what should clients do after status 429",
    "how is the service deployed",
)
STAGES = ("embedding", "vector", "lexical", "fusion", "rows", "rerank", "evidence", "total")
STAGE = "rag_retriever_stage_duration_seconds_count"
ANSWERS = "rag_retriever_answers_total"
DEGRADED = "rag_retriever_degraded_answers_total"
RERANK = "rag_retriever_rerank_total"
CACHE = "rag_retriever_query_embedding_cache_requests_total"
BATCH = "rag_retriever_query_embedding_batch_size"
SERVING = "rag_retriever_reranker_serving"


def scrape(stack: BackgroundStack) -> Scrape:
    assert stack.stack is not None
    return Scrape.fetch(stack.stack.retriever.telemetry.metrics_url)


def delta(before: Scrape, after: Scrape, name: str, **labels: str) -> float:
    return after.value(name, **labels) - before.value(name, **labels)


def with_metrics() -> tuple[Telemetry, Telemetry]:
    return Telemetry("indexer"), Telemetry("retriever", metrics_port=0)


@pytest.fixture(scope="module")
def faulty(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[tuple[Faults, BackgroundStack]]:
    """The stack with the corpus, a listener on a free port, stores wrapped by
    fault injectors (passing through until told otherwise) and the Reranker's
    address on a closed port (as the session's embedded_stack)."""
    faults = Faults(embedder)
    stack = BackgroundStack(
        tmp_path_factory.mktemp("metrics"),
        embedder,  # the real one: its query observer is this Retriever's metrics
        reranker_addr=f"127.0.0.1:{free_port()}",
        wrap_stores=faults.wrap,
        telemetry=with_metrics(),
    ).start()
    stack.upsert(corpus_documents())
    yield faults, stack
    stack.stop()


@pytest.fixture
def stack(faulty: tuple[Faults, BackgroundStack]) -> BackgroundStack:
    return faulty[1]


def test_every_retriever_metric_of_the_contract_is_exposed(stack: BackgroundStack) -> None:
    stack.retrieve(QUERIES[0], top_k=3)  # the gRPC call metrics exist once a call was made
    page = scrape(stack)
    for name in EXPORTED_BY["retriever"]:
        metric = CONTRACT[name]
        for series in exposed_names(name, metric):
            assert page.has(series), series
        if not name.startswith("rag_retriever_"):
            continue
        for label, values in metric.labels.items():
            series = next(iter(exposed_names(name, metric)))
            if values is not None:  # a closed set: every value declared, no other
                assert page.label_values(series, label) == values, (name, label)


def test_healthy_retrieves_count_answers_stages_and_the_reranker_fallback(
    stack: BackgroundStack,
) -> None:
    before = scrape(stack)
    for query in QUERIES:
        reply = stack.retrieve(query, top_k=5)
        assert reply.hits and reply.rerank.fallback
        assert [d.component for d in reply.degraded] == ["reranker"]
    after = scrape(stack)
    n = len(QUERIES)
    assert delta(before, after, ANSWERS, degraded="true") == n
    assert delta(before, after, ANSWERS, degraded="false") == 0
    assert delta(before, after, RERANK, outcome="fallback") == n
    assert delta(before, after, RERANK) == n
    assert delta(before, after, DEGRADED, component="reranker", code="reranker_unavailable") == n
    assert delta(before, after, DEGRADED) == n
    for stage in STAGES:
        # The embedded stores read whole rows in one phase: no second read.
        expected = 0 if stage == "rows" else n
        assert delta(before, after, STAGE, stage=stage) == expected, stage
    assert after.value(SERVING) == 0
    handled = "grpc_server_handled_total"
    assert delta(before, after, handled, grpc_method="Retrieve", grpc_code="OK") == n


def test_a_repeated_query_is_a_cache_miss_then_a_hit(
    stack: BackgroundStack, embedder: Embedder
) -> None:
    assert stack.stack is not None
    assert embedder.query_observer is stack.stack.retriever.metrics
    query = f"restore the stores from snapshots {uuid.uuid4().hex}"  # never embedded before
    before = scrape(stack)
    stack.retrieve(query, top_k=3)
    middle = scrape(stack)
    stack.retrieve(query, top_k=3)
    after = scrape(stack)
    assert delta(before, middle, CACHE, result="miss") == 1
    assert delta(before, middle, CACHE, result="hit") == 0
    assert delta(before, middle, f"{BATCH}_count") == 1
    assert delta(middle, after, CACHE, result="hit") == 1
    assert delta(middle, after, CACHE, result="miss") == 0
    assert delta(middle, after, f"{BATCH}_count") == 0  # a hit reaches no model


def test_concurrent_queries_are_counted_once_each_in_their_passes(stack: BackgroundStack) -> None:
    queries = [f"deployment checklist {uuid.uuid4().hex}" for _ in range(6)]
    before = scrape(stack)
    with ThreadPoolExecutor(len(queries)) as pool:
        list(pool.map(lambda q: stack.retrieve(q, top_k=3), queries))
    after = scrape(stack)
    assert delta(before, after, CACHE, result="miss") == len(queries)
    # Each query is answered by exactly one pass, however they were batched.
    assert delta(before, after, f"{BATCH}_sum") == len(queries)
    assert 1 <= delta(before, after, f"{BATCH}_count") <= len(queries)


def test_disable_rerank_counts_off_and_a_whole_answer(stack: BackgroundStack) -> None:
    before = scrape(stack)
    reply = stack.retrieve(QUERIES[1], top_k=5, disable_rerank=True)
    after = scrape(stack)
    assert not reply.degraded
    assert delta(before, after, RERANK, outcome="off") == 1
    assert delta(before, after, ANSWERS, degraded="false") == 1
    assert delta(before, after, ANSWERS, degraded="true") == 0
    assert delta(before, after, DEGRADED) == 0
    # Reranking did not run, so its (near-zero) time is not observed.
    assert delta(before, after, STAGE, stage="rerank") == 0
    assert delta(before, after, STAGE, stage="total") == 1


def test_a_failing_lexical_store_counts_a_lexical_error(
    faulty: tuple[Faults, BackgroundStack],
) -> None:
    faults, stack = faulty
    assert faults.lexical is not None
    before = scrape(stack)
    faults.lexical.mode = RAISE
    try:
        reply = stack.retrieve(QUERIES[0], top_k=5, disable_rerank=True)
    finally:
        faults.lexical.mode = OK
    after = scrape(stack)
    assert [d.component for d in reply.degraded] == ["lexical"]
    assert delta(before, after, DEGRADED, component="lexical", code="lexical_error") == 1
    assert delta(before, after, DEGRADED) == 1
    assert delta(before, after, ANSWERS, degraded="true") == 1
    # The channel ran (and failed): its time counts; the vector channel's too.
    assert delta(before, after, STAGE, stage="lexical") == 1
    assert delta(before, after, STAGE, stage="vector") == 1


def test_only_the_asked_channel_is_timed(stack: BackgroundStack) -> None:
    before = scrape(stack)
    stack.retrieve(QUERIES[0], top_k=5, channels=[rpb.CHANNEL_LEXICAL], disable_rerank=True)
    after = scrape(stack)
    assert delta(before, after, STAGE, stage="lexical") == 1
    assert delta(before, after, STAGE, stage="vector") == 0
    assert delta(before, after, STAGE, stage="embedding") == 0
    assert delta(before, after, ANSWERS, degraded="false") == 1


# --- with a real Reranker (a tiny cross-encoder built by the test) -------------


@pytest.fixture(scope="module")
def reranked(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    root = tmp_path_factory.mktemp("metrics-rerank")
    model = build_tiny_cross_encoder(root / "model")
    stack, _ = start_reranked_stack(
        root,
        # A pass-through wrapper (no fault set), so this second Retriever does
        # not take over the shared embedder's query observer from the first.
        FaultySearch(embedder, []),  # type: ignore[arg-type]
        str(model),
        telemetry=with_metrics(),
    )
    yield stack
    stack.stop()


def wait_until_serving(stack: BackgroundStack, timeout_s: float = 30) -> Scrape:
    """The Retriever started before the Reranker: its health re-check finds it."""
    deadline = time.monotonic() + timeout_s
    while (page := scrape(stack)).value(SERVING) != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    return page


def test_a_serving_reranker_counts_used_and_serving(reranked: BackgroundStack) -> None:
    before = wait_until_serving(reranked)
    assert before.value(SERVING) == 1
    reply = reranked.retrieve(QUERIES[1], top_k=10)
    after = scrape(reranked)
    assert reply.rerank.used and not reply.rerank.fallback and not reply.degraded
    assert delta(before, after, RERANK, outcome="used") == 1
    assert delta(before, after, RERANK) == 1
    assert delta(before, after, ANSWERS, degraded="false") == 1
    assert delta(before, after, STAGE, stage="rerank") == 1
    assert after.value(SERVING) == 1


# --- the mapping from outcomes to labels (no servers) ---------------------------


def fallback(code: RerankCode, reranked: int = 0) -> RerankOutcome:
    return RerankOutcome(code, fallback=True, requested=True, candidates=5, reranked=reranked)


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (RerankOutcome(RerankCode.RERANKED, used=True, requested=True, reranked=5), "used"),
        (fallback(RerankCode.PARTIAL, reranked=2), "partial"),
        (fallback(RerankCode.UNAVAILABLE), "fallback"),
        (fallback(RerankCode.TIMEOUT), "fallback"),
        (fallback(RerankCode.SKIPPED), "fallback"),
        (fallback(RerankCode.ERROR), "fallback"),
        (RerankOutcome(RerankCode.OFF), "off"),
        (RerankOutcome(RerankCode.NOT_CONFIGURED), "off"),
        (RerankOutcome(RerankCode.NO_CANDIDATES), "off"),
    ],
)
def test_rerank_outcomes(outcome: RerankOutcome, expected: str) -> None:
    assert rerank_outcome(outcome) == expected


def test_no_reranker_configured_means_no_serving_series() -> None:
    registry = CollectorRegistry()
    RetrievalMetrics(registry)
    assert registry.get_sample_value(SERVING) is None
    assert registry.get_sample_value(RERANK, {"outcome": "off"}) == 0
