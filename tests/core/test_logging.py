"""Log hygiene: a noisy library's repeats are dropped, our own lines are not."""

from __future__ import annotations

import logging
import sys

import pytest

from services.core.logging import EndedCallReply, OncePerInterval

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


class ExecuteBatchError(Exception):
    """Stands in for grpc's cygrpc class of that name (matched by name)."""


def test_a_reply_to_an_ended_call_is_one_warning_line_not_a_traceback() -> None:
    try:
        raise ExecuteBatchError('Failed "execute_batch"')
    except ExecuteBatchError:
        exc_info = sys.exc_info()
    message = "ExecuteBatchError raised in core by servicer method [%s]"
    entry = logging.LogRecord(
        "grpc._cython.cygrpc", logging.ERROR, __file__, 1, message,
        ("/rag.retriever.v1.Retriever/Retrieve",), exc_info,
    )  # fmt: skip
    assert EndedCallReply().filter(entry)
    assert entry.levelno == logging.WARNING and entry.exc_info is None
    assert entry.getMessage() == (
        "/rag.retriever.v1.Retriever/Retrieve: reply not sent, the call had ended "
        "(deadline passed or cancelled)"
    )
    other = record("grpc._cython.cygrpc", 1.0, logging.ERROR)
    assert EndedCallReply().filter(other) and other.levelno == logging.ERROR
