"""The metrics contract between the services and deploy/: every metric name
(with its type and labels) that deploy/prometheus/alerts.yml and
deploy/grafana/rag-query-path.json may query, and where each service serves
them.

test_monitoring.py checks the rules and the dashboard against this list; a
test of the running services can check the list against their /metrics
(`CONTRACT[name].kind` is the Prometheus type, so a histogram `x` is exposed as
`x_bucket`, `x_sum` and `x_count`, a counter `x_total` as `x_total`).

A label maps to the values it may take where those are a closed set, or to
None where they are open (scope ids, reasons).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from gateway.metrics import BREAKER_STATES, CONNECTION_REFUSALS, OUTCOMES
from services.contract.genproto.rag.indexer.v1 import indexer_pb2
from services.contract.genproto.rag.reranker.v1 import reranker_pb2
from services.contract.genproto.rag.retriever.v1 import retriever_pb2

# The scrape jobs: Prometheus job name (= compose service = Kubernetes
# Deployment and app.kubernetes.io/name) → metrics port and the variable that
# sets it. The path is /metrics, plain HTTP, everywhere.
METRICS_PORTS: dict[str, int] = {
    "gateway": 9464,
    "indexer": 9465,
    "retriever": 9466,
    "reranker": 9467,
}
PORT_VARIABLES: dict[str, str] = {
    "gateway": "RAG_GATEWAY_METRICS_PORT",
    "indexer": "RAG_INDEXER_METRICS_PORT",
    "retriever": "RAG_RETRIEVER_METRICS_PORT",
    "reranker": "RAG_RERANKER_METRICS_PORT",
}
# The listener's interface (0.0.0.0 in containers so Prometheus can reach it).
HOST_VARIABLES: dict[str, str] = {
    "gateway": "RAG_GATEWAY_METRICS_HOST",
    "indexer": "RAG_METRICS_HOST",
    "retriever": "RAG_METRICS_HOST",
    "reranker": "RAG_METRICS_HOST",
}
METRICS_PATH = "/metrics"

# Our services, and the standard ones every server also answers (health
# checks and reflection are observed like any call; the rules filter by
# grpc_service where it matters).
GRPC_SERVICES = {
    descriptor.full_name: descriptor
    for module in (indexer_pb2, retriever_pb2, reranker_pb2, health_pb2, reflection_pb2)
    for descriptor in module.DESCRIPTOR.services_by_name.values()
}
GRPC_METHODS = {m.name for d in GRPC_SERVICES.values() for m in d.methods}
GRPC_TYPES = {"unary", "client_stream", "server_stream", "bidi_stream"}
GRPC_CODES = {code.name for code in grpc.StatusCode}  # OK, INTERNAL, UNAVAILABLE, …

Labels = dict[str, frozenset[str] | None]


@dataclass(frozen=True)
class Metric:
    kind: str  # counter | gauge | histogram
    labels: Labels = field(default_factory=dict)


def closed(*values: str) -> frozenset[str]:
    return frozenset(values)


_CALL: Labels = {
    "grpc_type": frozenset(GRPC_TYPES),
    "grpc_service": frozenset(GRPC_SERVICES),
    "grpc_method": frozenset(GRPC_METHODS),
}

CONTRACT: dict[str, Metric] = {
    # Every gRPC service (the server interceptor, go-grpc-prometheus naming).
    "grpc_server_started_total": Metric("counter", _CALL),
    "grpc_server_handled_total": Metric("counter", {**_CALL, "grpc_code": frozenset(GRPC_CODES)}),
    "grpc_server_handling_seconds": Metric("histogram", _CALL),
    # Retriever
    "rag_retriever_stage_duration_seconds": Metric(
        "histogram",
        {
            "stage": closed(
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
        },
    ),
    "rag_retriever_answers_total": Metric("counter", {"degraded": closed("true", "false")}),
    "rag_retriever_degraded_answers_total": Metric(
        "counter",
        {"component": closed("vector", "lexical", "embedding", "reranker"), "code": None},
    ),
    "rag_retriever_rerank_total": Metric(
        "counter", {"outcome": closed("used", "partial", "fallback", "off")}
    ),
    "rag_retriever_query_embedding_batch_size": Metric("histogram"),
    "rag_retriever_query_embedding_cache_requests_total": Metric(
        "counter", {"result": closed("hit", "miss")}
    ),
    "rag_retriever_reranker_serving": Metric("gauge"),
    # Indexer
    "rag_indexer_documents_total": Metric(
        "counter",
        {
            "operation": None,
            "state": closed("added", "updated", "unchanged", "deleted", "rejected"),
        },
    ),
    "rag_indexer_chunks_embedded_total": Metric("counter"),
    "rag_indexer_store_write_duration_seconds": Metric(
        "histogram", {"store": closed("vector", "lexical", "manifest")}
    ),
    "rag_indexer_store_write_retries_total": Metric(
        "counter", {"store": closed("vector", "lexical", "manifest")}
    ),
    "rag_indexer_pending_records": Metric("gauge"),
    "rag_indexer_vectors_unindexed": Metric("gauge"),
    "rag_index_documents": Metric("gauge", {"scope_id": None}),
    "rag_index_chunks": Metric("gauge", {"scope_id": None}),
    "rag_index_vectors": Metric("gauge", {"scope_id": None}),
    "rag_index_lexical_rows": Metric("gauge", {"scope_id": None}),
    # Reranker
    "rag_reranker_pairs_scored_total": Metric("counter"),
    "rag_reranker_batch_size": Metric("histogram"),
    "rag_reranker_batch_requests": Metric("histogram"),
    "rag_reranker_partial_results_total": Metric("counter", {"reason": None}),
    "rag_reranker_queue_wait_seconds": Metric("histogram"),
    "rag_reranker_model_loaded": Metric("gauge"),
    # Gateway
    "gateway_search_requests_total": Metric("counter", {"outcome": frozenset(OUTCOMES)}),
    "gateway_search_duration_seconds": Metric("histogram", {"outcome": frozenset(OUTCOMES)}),
    "gateway_retriever_calls_total": Metric("counter", {"code": frozenset(GRPC_CODES)}),
    "gateway_breaker_state": Metric("gauge", {"state": frozenset(BREAKER_STATES)}),
    "gateway_connections_refused_total": Metric(
        "counter", {"reason": frozenset(CONNECTION_REFUSALS)}
    ),
}

# Made by Prometheus itself for every target, not by the services.
PROMETHEUS_BUILTIN: dict[str, Metric] = {"up": Metric("gauge")}
# Labels Prometheus attaches to every series it scrapes.
TARGET_LABELS = frozenset({"job", "instance"})

# Which service exports what (the gRPC call metrics: all three gRPC services).
EXPORTED_BY: dict[str, set[str]] = {
    "gateway": {name for name in CONTRACT if name.startswith("gateway_")},
    "indexer": {
        name for name in CONTRACT if name.startswith(("grpc_", "rag_indexer_", "rag_index_"))
    },
    "retriever": {name for name in CONTRACT if name.startswith(("grpc_", "rag_retriever_"))},
    "reranker": {name for name in CONTRACT if name.startswith(("grpc_", "rag_reranker_"))},
}


def exposed_names(name: str, metric: Metric) -> set[str]:
    """The series names a metric appears under in the exposition format."""
    if metric.kind == "histogram":
        return {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return {name}


def series_index() -> dict[str, tuple[str, Metric]]:
    """Series name (as written in PromQL) → (contract name, metric)."""
    index: dict[str, tuple[str, Metric]] = {}
    for name, metric in {**CONTRACT, **PROMETHEUS_BUILTIN}.items():
        for series in exposed_names(name, metric):
            index[series] = (name, metric)
    return index
