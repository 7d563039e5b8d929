"""The Retriever's own Prometheus metrics, in its app's registry (next to the
gRPC call metrics every service has). Names and label values are a contract
with deploy/ (tests/deploy/metrics_contract.py):

- `rag_retriever_stage_duration_seconds{stage}`: the stages that ran;
- `rag_retriever_answers_total{degraded}`: every answer Retrieve returned;
- `rag_retriever_degraded_answers_total{component,code}`: each degradation;
- `rag_retriever_rerank_total{outcome}`: used | partial | fallback | off;
- `rag_retriever_query_embedding_batch_size`: queries per query forward pass;
- `rag_retriever_query_embedding_cache_requests_total{result}`: hit | miss;
- `rag_retriever_reranker_serving`: 1/0, only when a Reranker is configured.

Everything about an answer is recorded once, by `record(result)`, from the
structured outcomes (channel status, rerank code), never from reason text.
Every series of a closed label set is declared at 0, so rate() and alerts see
it from the first scrape, not after the first incident.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.retriever.channels import ChannelOutcome, ChannelStatus
from services.retriever.degradation import CHANNEL_COMPONENTS, RERANKER_FAILURES
from services.retriever.requests import RetrievalResult
from services.retriever.reranker_health import RerankerHealth
from services.retriever.reranking import RerankOutcome

STAGES = (
    "locales",
    "embedding",
    "translation",
    "vector",
    "lexical",
    "fusion",
    "rows",
    "rerank",
    "evidence",
    "total",
)
# From a cached embedding or a fusion of a few lists (~0.5 ms) to a channel
# that ran into its timeout (1 s by default) and a slow whole request.
STAGE_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
RERANK_OUTCOMES = ("used", "partial", "fallback", "off")

_CHANNEL_FAILURES = (ChannelStatus.TIMEOUT, ChannelStatus.ERROR, ChannelStatus.SKIPPED)
# component → every code it may be counted under: the closed set declared at 0.
DEGRADATION_CODES: dict[str, tuple[str, ...]] = {
    **{c: tuple(f"{c}_{s.value}" for s in _CHANNEL_FAILURES) for c in CHANNEL_COMPONENTS},
    "reranker": tuple(code.value for code in RERANKER_FAILURES),
}


class RetrievalMetrics:
    """Also the Embedder's query observer (`observe_query_batch`,
    `observe_query_cache`): only the Retriever embeds queries."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.stages = Histogram(
            "rag_retriever_stage_duration_seconds",
            "Time spent in each Retrieve stage that ran (vector includes embedding)",
            ["stage"],
            buckets=STAGE_BUCKETS_S,
            registry=registry,
        )
        self.answers = Counter(
            "rag_retriever_answers",
            "Retrieve answers returned, by whether any part degraded",
            ["degraded"],
            registry=registry,
        )
        self.degradations = Counter(
            "rag_retriever_degraded_answers",
            "Degradations in Retrieve answers, by component and code",
            ["component", "code"],
            registry=registry,
        )
        self.rerank = Counter(
            "rag_retriever_rerank",
            "Retrieve answers by what reranking did: used, partial, fallback, off",
            ["outcome"],
            registry=registry,
        )
        self._declare()
        self._embedding_metrics(registry)

    def _declare(self) -> None:
        for stage in STAGES:
            self.stages.labels(stage=stage)
        for degraded in ("true", "false"):
            self.answers.labels(degraded=degraded)
        for component, codes in DEGRADATION_CODES.items():
            for code in codes:
                self.degradations.labels(component=component, code=code)
        for outcome in RERANK_OUTCOMES:
            self.rerank.labels(outcome=outcome)

    def _embedding_metrics(self, registry: CollectorRegistry) -> None:
        self.batch_size = Histogram(
            "rag_retriever_query_embedding_batch_size",
            "Queries answered by one forward pass of the query embedder",
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
        self.cache = Counter(
            "rag_retriever_query_embedding_cache_requests",
            "Query embedding cache look-ups, by result",
            ["result"],
            registry=registry,
        )
        for result in ("hit", "miss"):
            self.cache.labels(result=result)

    def watch_reranker(self, health: RerankerHealth) -> None:
        """Serve `rag_retriever_reranker_serving` (read at scrape time). Not
        called without a configured Reranker, so the series is then absent:
        there is nothing to be up or down, and alerts use the rerank counter."""
        serving = Gauge(
            "rag_retriever_reranker_serving",
            "1 while the Reranker is believed serving, 0 while it is skipped as down",
            registry=self.registry,
        )
        serving.set_function(lambda: 1.0 if health.serving else 0.0)

    # --- per answer ---------------------------------------------------------------

    def record(self, result: RetrievalResult) -> None:
        """Count one answer: its stages, degradations and rerank outcome."""
        for stage, ms in ran_stages(result):
            self.stages.labels(stage=stage).observe(ms / 1000)
        self.answers.labels(degraded="true" if result.degraded else "false").inc()
        for failure in result.degraded:
            self.degradations.labels(component=failure.coded_component, code=failure.code).inc()
        self.rerank.labels(outcome=rerank_outcome(result.rerank)).inc()

    # --- the Embedder's query observer (called from worker threads) ----------------

    def observe_query_batch(self, size: int) -> None:
        self.batch_size.observe(size)

    def observe_query_cache(self, hit: bool) -> None:
        self.cache.labels(result="hit" if hit else "miss").inc()


def ran_stages(result: RetrievalResult) -> list[tuple[str, float]]:
    """The timed stages that actually ran. A channel not requested, left out
    by the language rule or skipped for lack of time is recorded with 0 ms;
    observing it would drag the latency quantiles down. The rerank stage is
    timed even when reranking was off (a few microseconds to decide so)."""
    idle = {o.channel.value for o in result.channels if not _ran(o)}
    if not result.rerank.requested:
        idle.add("rerank")
    return [(stage, ms) for stage, ms in result.timings if stage in STAGES and stage not in idle]


def _ran(outcome: ChannelOutcome) -> bool:
    return outcome.requested and outcome.status is not ChannelStatus.SKIPPED


def rerank_outcome(rerank: RerankOutcome) -> str:
    """used: every candidate reranked; partial: some; fallback: wanted but
    none (unavailable, not serving, timeout, too little time, error); off:
    not wanted or not possible (disabled by request, no reranker configured,
    no candidates)."""
    if not rerank.requested:
        return "off"
    if not rerank.fallback:
        return "used"
    return "partial" if rerank.reranked > 0 else "fallback"
