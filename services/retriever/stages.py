"""The stages of one Retrieve, timed and traced in one place.

`StageRecorder` is made per request. `stage(name)` is a context manager that
times the stage (into `timings`, which the reply and the metrics read) and,
when tracing is on, makes it a span under the request's span. Stages that run
in a worker thread (the store searches) pass the request's trace context
along, because a thread does not inherit the event loop's context.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace


class StageRecorder:
    def __init__(self, tracer: trace.Tracer | None = None) -> None:
        self.tracer = tracer or trace.NoOpTracer()
        # Appended from worker threads too: list.append is atomic in CPython.
        self.timings: list[tuple[str, float]] = []
        # The request's context, for stages that run in another thread.
        self.context = otel_context.get_current()

    @contextmanager
    def stage(self, name: str, timed: bool = True, **attributes: Any) -> Iterator[trace.Span]:
        """`timed` False: a span only (a part of a stage timed as a whole)."""
        started = time.perf_counter()
        with self.tracer.start_as_current_span(
            name, context=self.context, attributes=attributes or None
        ) as span:
            try:
                yield span
            finally:
                if timed:
                    self.timings.append((name, (time.perf_counter() - started) * 1000))

    def describe_request(
        self, query: str, intent: str, top_k: int, record_query_text: bool = False
    ) -> None:
        """The request on the RPC's span: the query's length, never its text
        unless the retention setting allows it (RAG_TRACE_QUERY_TEXT)."""
        span = trace.get_current_span()
        if not span.is_recording():
            return
        span.set_attributes(
            {"rag.query.chars": len(query), "rag.intent": intent, "rag.top_k": top_k}
        )
        if record_query_text:
            span.set_attribute("rag.query", query)

    def describe_answer(self, hits: int, degraded: int) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes({"rag.hits": hits, "rag.degraded": degraded})

    def record(self, name: str, ms: float) -> None:
        """A stage timed elsewhere (e.g. a whole channel, from its outcome)."""
        self.timings.append((name, ms))
