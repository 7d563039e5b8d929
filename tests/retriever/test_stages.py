"""The stage recorder: stages timed into the answer's timings and traced as
spans; the query's text on a span only when retention allows it."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.retriever.stages import StageRecorder
from services.runtime.observability.tracing import Tracing

pytestmark = pytest.mark.unit


def traced_request(record_query_text: bool) -> tuple[StageRecorder, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer = Tracing.with_exporter("rag-retriever", exporter).tracer
    with tracer.start_as_current_span("Retrieve"):
        stages = StageRecorder(tracer)
        stages.describe_request("what is error 429", "site_search", 5, record_query_text)
        with stages.stage("fusion"):
            pass
        with stages.stage("vector_search", timed=False):
            pass
        stages.record("vector", 2.5)
    return stages, exporter


def test_stages_are_timed_and_traced_under_the_request() -> None:
    stages, exporter = traced_request(record_query_text=False)
    assert [name for name, _ in stages.timings] == ["fusion", "vector"]
    spans = {span.name: span for span in exporter.get_finished_spans()}
    root = spans["Retrieve"]
    assert spans["fusion"].parent is not None
    assert spans["fusion"].parent.span_id == root.context.span_id
    assert spans["vector_search"].parent.span_id == root.context.span_id  # type: ignore[union-attr]
    assert root.attributes["rag.query.chars"] == len("what is error 429")
    assert "rag.query" not in root.attributes


def test_the_query_text_is_recorded_only_when_retention_allows() -> None:
    _, exporter = traced_request(record_query_text=True)
    root = next(s for s in exporter.get_finished_spans() if s.name == "Retrieve")
    assert root.attributes["rag.query"] == "what is error 429"


def test_without_a_tracer_stages_are_still_timed() -> None:
    stages = StageRecorder()
    with stages.stage("evidence"):
        pass
    stages.describe_request("q", "site_search", 5)
    assert [name for name, _ in stages.timings] == ["evidence"]
