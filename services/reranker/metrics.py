"""Prometheus metrics of the Reranker's scoring, in the app's own registry
(served by its `Telemetry` listener next to the `grpc_server_*` call metrics):

- `rag_reranker_pairs_scored_total`: (query, passage) pairs the model scored.
- `rag_reranker_batch_size`: pairs per model batch (histogram).
- `rag_reranker_batch_requests`: Rerank calls whose pairs shared one model
  batch (histogram; above 1 when concurrent calls share forward passes).
- `rag_reranker_partial_results_total{reason}`: scoring calls that stopped
  before the last passage, by why (`PARTIAL_REASONS`).
- `rag_reranker_queue_wait_seconds`: how long a call waited for the shared
  model before its first batch (histogram): the saturation signal.
- `rag_reranker_model_loaded`: 1 once a model is loaded and warmed up.

In-flight Rerank calls need no metric of their own: they are
`grpc_server_started_total - grpc_server_handled_total` for the method.

`RerankerMetrics` is the scorer's `ScoringObserver`; the scorer calls it from
its model thread and its callers' threads (prometheus_client metrics are thread-safe).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.reranker.jobs import STOP_DEADLINE, STOP_QUEUE_TIMEOUT

# Powers of two up to twice the largest sensible RAG_RERANK_BATCH_SIZE: a
# batch is the configured size unless the deadline or the request cuts it.
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
# From an idle model (microseconds) to waits that eat a whole rerank budget
# (hundreds of milliseconds) and beyond.
QUEUE_WAIT_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)
REASON_OTHER = "other"
# A closed set, so each series exists (at 0) from the start and a new stop
# reason in the scorer cannot grow the label's cardinality.
PARTIAL_REASONS = (STOP_DEADLINE, STOP_QUEUE_TIMEOUT, REASON_OTHER)


def partial_reason(stop_reason: str) -> str:
    """The label value for one of the scorer's stop reasons."""
    return stop_reason if stop_reason in PARTIAL_REASONS else REASON_OTHER


class RerankerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.pairs_scored = Counter(
            "rag_reranker_pairs_scored",
            "(query, passage) pairs scored by the cross-encoder",
            registry=registry,
        )
        self.batch_size = Histogram(
            "rag_reranker_batch_size",
            "Pairs per cross-encoder batch",
            buckets=BATCH_SIZE_BUCKETS,
            registry=registry,
        )
        self.batch_requests = Histogram(
            "rag_reranker_batch_requests",
            "Rerank calls whose pairs shared one cross-encoder batch",
            buckets=BATCH_SIZE_BUCKETS,
            registry=registry,
        )
        self.partial_results = Counter(
            "rag_reranker_partial_results",
            "Scoring calls that returned fewer scores than passages, by stop reason",
            ["reason"],
            registry=registry,
        )
        self.queue_wait = Histogram(
            "rag_reranker_queue_wait_seconds",
            "Time a call waited for the shared model before its first batch "
            "(or until it gave up at its deadline)",
            buckets=QUEUE_WAIT_BUCKETS_S,
            registry=registry,
        )
        self.model_loaded = Gauge(
            "rag_reranker_model_loaded",
            "1 when the cross-encoder is loaded and warmed up, else 0",
            registry=registry,
        )
        for reason in PARTIAL_REASONS:
            self.partial_results.labels(reason=reason)
        self.model_loaded.set(0)

    def batch_scored(self, pairs: int, requests: int) -> None:
        self.pairs_scored.inc(pairs)
        self.batch_size.observe(pairs)
        self.batch_requests.observe(requests)

    def queue_waited(self, seconds: float) -> None:
        self.queue_wait.observe(seconds)

    def stopped_early(self, stop_reason: str) -> None:
        self.partial_results.labels(reason=partial_reason(stop_reason)).inc()

    def model_ready(self, ready: bool) -> None:
        self.model_loaded.set(1 if ready else 0)
