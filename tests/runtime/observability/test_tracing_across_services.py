"""One gateway request traced across the three services: the real gateway,
the real embedded Retriever and the real Reranker (a tiny cross-encoder built
by the test), each with its own tracer provider exporting to one in-memory
exporter. The span tree follows the request stage by stage, the W3C context
crosses HTTP and gRPC, and the gateway's log line carries the trace id."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import structlog
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.logging import add_trace_context
from services.embedding.embedder import Embedder
from services.runtime.observability.telemetry import Telemetry
from services.runtime.observability.tracing import Tracing
from tests.gateway.support import ALLOWED_ORIGIN, gateway_settings, serve_gateway
from tests.reranker.stack import start_reranked_stack
from tests.support.corpus import corpus_documents
from tests.support.stack import BackgroundStack, free_port
from tests.support.tiny_cross_encoder import build_tiny_cross_encoder

pytestmark = pytest.mark.integration

QUERY = "what should clients do after status 429"
# A caller's own W3C trace context: the gateway continues its trace.
CALLER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{CALLER_TRACE_ID}-00f067aa0ba902b7-01"
RETRIEVE = "rag.retriever.v1.Retriever/Retrieve"
RERANK = "rag.reranker.v1.Reranker/Rerank"
UPSERT = "rag.indexer.v1.Indexer/Upsert"
GATEWAY = "POST /v1/search"


class SpanSink:
    """One in-memory exporter per service (a provider's shutdown stops its
    exporter: the gateway's ends with each test), read as one."""

    def __init__(self) -> None:
        self.exporters: list[InMemorySpanExporter] = []

    def tracing(self, service: str) -> Tracing:
        exporter = InMemorySpanExporter()
        self.exporters.append(exporter)
        return Tracing.with_exporter(service, exporter)

    def get_finished_spans(self) -> list[ReadableSpan]:
        return [span for e in self.exporters for span in e.get_finished_spans()]

    def clear(self) -> None:
        for exporter in self.exporters:
            exporter.clear()


class TracedServices:
    def __init__(self, stack: BackgroundStack, exporter: SpanSink) -> None:
        self.stack, self.exporter = stack, exporter


@pytest.fixture(scope="module")
def traced(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[TracedServices]:
    root = tmp_path_factory.mktemp("traced")
    exporter = SpanSink()
    telemetry = (
        Telemetry("indexer", tracing=exporter.tracing("rag-indexer")),
        Telemetry("retriever", tracing=exporter.tracing("rag-retriever")),
    )
    stack, _ = start_reranked_stack(
        root,
        embedder,
        str(build_tiny_cross_encoder(root / "model")),
        telemetry=telemetry,
        reranker_telemetry=Telemetry("reranker", tracing=exporter.tracing("rag-reranker")),
    )
    yield TracedServices(stack, exporter)
    stack.stop()


def finished(exporter: SpanSink, *names: str) -> list[ReadableSpan]:
    """The spans once those named have ended: a server span ends just after
    its reply is sent, so the caller may hold the reply a moment earlier."""
    for _ in range(500):
        spans = list(exporter.get_finished_spans())
        if set(names) <= {span.name for span in spans}:
            return spans
        time.sleep(0.01)
    raise AssertionError(f"never finished: {names}; got {[s.name for s in spans]}")


def by_name(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, f"{name}: {[s.name for s in spans]}"
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


async def search(
    traced: TracedServices, trust_traceparent: bool = True
) -> tuple[httpx.Response, list[dict[str, object]]]:
    settings = gateway_settings(
        traced.stack.retriever_addr,
        gateway_request_deadline_s=10.0,
        gateway_trust_traceparent=trust_traceparent,
    )
    tracing = traced.exporter.tracing("rag-gateway")
    async with serve_gateway(settings, tracing) as gw, httpx.AsyncClient(timeout=30) as client:
        traced.exporter.clear()
        processors = [structlog.contextvars.merge_contextvars, add_trace_context]
        with structlog.testing.capture_logs(processors=processors) as logs:
            reply = await client.post(
                f"{gw.url}/v1/search",
                json={"query": QUERY, "top_k": 5},
                headers={"origin": ALLOWED_ORIGIN, "traceparent": TRACEPARENT},
            )
    return reply, logs


async def test_one_request_is_one_trace_stage_by_stage(traced: TracedServices) -> None:
    reply, _ = await search(traced)
    assert reply.status_code == 200 and reply.json()["rerank"]["used"]
    spans = finished(traced.exporter, GATEWAY, RETRIEVE, RERANK)
    assert {format(s.context.trace_id, "032x") for s in spans} == {CALLER_TRACE_ID}

    gateway = by_name(spans, GATEWAY)
    retrieve = by_name(spans, RETRIEVE)
    rerank_stage = by_name(spans, "rerank")
    rerank_call = by_name(spans, RERANK)
    assert parent_of(gateway) == int(TRACEPARENT.split("-")[2], 16)  # the caller's span
    assert parent_of(retrieve) == gateway.context.span_id
    for stage in ("embedding", "vector_search", "lexical_search", "fusion", "rerank", "evidence"):
        assert parent_of(by_name(spans, stage)) == retrieve.context.span_id, stage
    assert parent_of(rerank_call) == rerank_stage.context.span_id

    assert gateway.resource.attributes["service.name"] == "rag-gateway"
    assert retrieve.resource.attributes["service.name"] == "rag-retriever"
    assert rerank_call.resource.attributes["service.name"] == "rag-reranker"
    assert retrieve.attributes["rpc.grpc.status_code"] == 0
    assert retrieve.attributes["rag.query.chars"] == len(QUERY)
    assert retrieve.attributes["rag.hits"] == 5
    assert rerank_stage.attributes["rag.rerank.reranked"] > 0
    assert by_name(spans, "lexical_search").attributes["rag.hits"] > 0
    # One request id from the gateway to the Reranker.
    request_id = reply.headers["x-request-id"]
    assert retrieve.attributes["rag.request_id"] == request_id
    assert rerank_call.attributes["rag.request_id"] == request_id


async def test_an_untrusted_traceparent_starts_a_trace_of_its_own(traced: TracedServices) -> None:
    """The default at the public edge: the caller's context is a link, not a parent."""
    reply, _ = await search(traced, trust_traceparent=False)
    assert reply.status_code == 200
    spans = finished(traced.exporter, GATEWAY, RETRIEVE, RERANK)
    gateway = by_name(spans, GATEWAY)
    own_trace = format(gateway.context.trace_id, "032x")
    assert own_trace != CALLER_TRACE_ID and gateway.parent is None
    assert [format(link.context.trace_id, "032x") for link in gateway.links] == [CALLER_TRACE_ID]
    assert {format(s.context.trace_id, "032x") for s in spans} == {own_trace}
    assert gateway.attributes["http.response.status_code"] == 200


async def test_spans_never_hold_the_query_text(traced: TracedServices) -> None:
    await search(traced)
    query_words = set(re.findall(r"\w+", QUERY.lower()))
    for span in finished(traced.exporter, RETRIEVE, RERANK):
        for value in (span.attributes or {}).values():
            if not isinstance(value, str):
                continue
            # Whole words only: a random request id such as 0966e0443f994296 may hold
            # the digits 429 by chance (it failed CI once), and that is not the query.
            leaked = query_words & set(re.findall(r"\w+", value.lower()))
            assert not leaked, (span.name, value)


async def test_the_gateway_log_line_carries_the_trace_id(traced: TracedServices) -> None:
    reply, logs = await search(traced)
    search_lines = [line for line in logs if line["event"] == "search"]
    assert len(search_lines) == 1
    assert search_lines[0]["trace_id"] == CALLER_TRACE_ID
    assert search_lines[0]["request_id"] == reply.headers["x-request-id"]


def test_an_upsert_is_traced_through_the_indexers_stages(traced: TracedServices) -> None:
    traced.exporter.clear()
    doc = corpus_documents()[0]
    doc.text += "\n\nA paragraph added so the document changes."
    traced.stack.upsert([doc])
    spans = finished(traced.exporter, UPSERT)
    upsert = by_name(spans, UPSERT)
    assert upsert.attributes["rag.operation"] == "upsert"
    assert upsert.attributes["rag.documents.changed"] == 1
    for stage in ("plan", "embed", "write vector", "write lexical"):
        found = [s for s in spans if s.name == stage]
        assert found and all(parent_of(s) == upsert.context.span_id for s in found), stage
    assert {format(s.context.trace_id, "032x") for s in spans} == {
        format(upsert.context.trace_id, "032x")
    }


def test_tracing_is_off_unless_the_environment_asks(tmp_path: Path) -> None:
    assert not Tracing.from_env("rag-x", environ={}).enabled
    assert not Tracing.from_env("rag-x", environ={"OTEL_TRACES_EXPORTER": "none"}).enabled
    on = Tracing.from_env("rag-x", environ={"OTEL_TRACES_EXPORTER": "console"})
    assert on.enabled
    on.shutdown()


async def test_a_hostile_traceparent_is_ignored(traced: TracedServices) -> None:
    settings = gateway_settings(traced.stack.retriever_addr, gateway_request_deadline_s=10.0)
    tracing = traced.exporter.tracing("rag-gateway")
    async with serve_gateway(settings, tracing) as gw, httpx.AsyncClient(timeout=30) as client:
        for header in ("00-zz-yy-01", "00-" + "f" * 4000, "ff-" + TRACEPARENT[3:] + "-x"):
            traced.exporter.clear()
            reply = await client.post(
                f"{gw.url}/v1/search",
                json={"query": QUERY},
                headers={"origin": ALLOWED_ORIGIN, "traceparent": header},
            )
            assert reply.status_code == 200, header
            gateway = by_name(finished(traced.exporter, GATEWAY), GATEWAY)
            assert gateway.parent is None and not gateway.links


def test_a_callers_malformed_request_id_is_replaced(traced: TracedServices) -> None:
    traced.exporter.clear()
    for request_id in ("short", "x" * 65, "evil;id=0123456789", "id with spaces 0123"):
        reply = traced.stack.retriever.Retrieve(
            rpb.RetrieveRequest(query="restore from snapshots", disable_rerank=True),
            metadata=[("x-request-id", request_id), ("traceparent", "00-garbage")],
            timeout=30,
        )
        assert reply.hits
    spans = []
    for _ in range(100):
        spans = [s for s in traced.exporter.get_finished_spans() if s.name == RETRIEVE]
        if len(spans) == 4:
            break
        time.sleep(0.01)
    assert len(spans) == 4
    for span in spans:
        assert re.fullmatch(r"[0-9a-f]{16}", str(span.attributes["rag.request_id"]))


async def test_a_failed_search_marks_the_gateway_span_failed(traced: TracedServices) -> None:
    """No Retriever behind the gateway: 502, and the span says so."""
    settings = gateway_settings(f"127.0.0.1:{free_port()}", gateway_request_deadline_s=2.0)
    tracing = traced.exporter.tracing("rag-gateway")
    async with serve_gateway(settings, tracing) as gw, httpx.AsyncClient(timeout=30) as client:
        traced.exporter.clear()
        reply = await client.post(
            f"{gw.url}/v1/search", json={"query": QUERY}, headers={"origin": ALLOWED_ORIGIN}
        )
    assert reply.status_code >= 500
    gateway = by_name(finished(traced.exporter, GATEWAY), GATEWAY)
    assert gateway.attributes["http.response.status_code"] == reply.status_code
    assert gateway.status.status_code.name == "ERROR"
