"""Structured logging (structlog over the standard library).

Services log events with key/value context; nothing logs raw query text unless
a service's retention setting allows it.
"""

from __future__ import annotations

import logging
import sys

import structlog
from opentelemetry import trace


def configure_logging(level: str = "INFO", json: bool = True) -> None:
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,  # request_id (observability.rpc_observer)
            add_trace_context,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    # With the trace collector unreachable the exporter would write several
    # lines per export attempt, every few seconds, for as long as it is down.
    # (A handler's filter: a logger's own would not see its children's records.)
    for handler in logging.getLogger().handlers:
        handler.addFilter(OncePerInterval("opentelemetry", NOISY_LIBRARY_INTERVAL_S))
        handler.addFilter(EndedCallReply())


NOISY_LIBRARY_INTERVAL_S = 60.0


class OncePerInterval(logging.Filter):
    """Of the records from loggers under `prefix`, lets through one per logger
    and level per interval (the first says what is wrong; the repeats say
    nothing new); every other record passes."""

    def __init__(self, prefix: str, interval_s: float) -> None:
        super().__init__()
        self.prefix, self.interval_s = prefix, interval_s
        self._last: dict[tuple[str, int], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.prefix):
            return True
        key = (record.name, record.levelno)
        last = self._last.get(key)
        if last is not None and record.created - last < self.interval_s:
            return False
        self._last[key] = record.created
        return True


class EndedCallReply(logging.Filter):
    """gRPC logs a reply to a call its core had already ended (the caller's
    deadline passed, or it cancelled, as the handler finished) as an ERROR
    with a traceback of gRPC's own frames: one line says it, at WARNING."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.name.startswith("grpc") and type(error).__name__ == "ExecuteBatchError":
            method = record.getMessage().split(" [", 1)[-1].rstrip("]")  # before msg changes
            record.msg = "%s: reply not sent, the call had ended (deadline passed or cancelled)"
            record.args = (method,)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def add_trace_context(
    logger: object, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """The current span's trace and span ids, so a log line leads to its trace
    (only while tracing is on: a no-op span has no valid context)."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    return event


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)  # type: ignore[no-any-return]
