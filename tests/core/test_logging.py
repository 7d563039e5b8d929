"""Log hygiene: a noisy library's repeats are dropped, our own lines are not."""

from __future__ import annotations

import logging

import pytest

from services.core.logging import OncePerInterval

pytestmark = pytest.mark.unit


def record(name: str, created: float, level: int = logging.WARNING) -> logging.LogRecord:
    entry = logging.LogRecord(name, level, __file__, 1, "export failed", None, None)
    entry.created = created
    return entry


def test_a_noisy_library_says_it_once_per_interval() -> None:
    once = OncePerInterval("opentelemetry", 60.0)
    exporter = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
    assert once.filter(record(exporter, 100.0))
    assert not once.filter(record(exporter, 130.0))
    assert once.filter(record(exporter, 130.0, logging.ERROR))  # another level: news
    assert once.filter(record(exporter, 161.0))
    assert all(once.filter(record("services.retriever", t)) for t in (100.0, 100.1, 100.2))
