"""Test helpers for the gateway: a scripted Retriever, a uvicorn runner, and a
real redis-server subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import uvicorn
from fastapi import FastAPI

from gateway.app import create_app
from gateway.retriever_client import RETRIEVER_SERVICE
from gateway.settings import GatewaySettings
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.runtime.observability.tracing import Tracing
from services.runtime.server import GrpcServer, ServerOptions
from tests.support.ports import free_port

ALLOWED_ORIGIN = "http://allowed.example"
FOREIGN_ORIGIN = "http://evil.example"
SEARCH = {"query": "which port does the gateway listen on"}


@dataclass(frozen=True)
class CorpusChunk:
    chunk_id: str
    doc_id: str
    url: str
    title: str
    heading_path: str
    text: str


# Same URLs and titles as the real test corpus (tests/fixtures/corpus), so the
# browser test asserts the same things against this double and the real stack.
CORPUS: tuple[CorpusChunk, ...] = (
    CorpusChunk(
        "c-429",
        "rate-limits.md",
        "https://docs.example/rate-limits",
        "Rate limits",
        "Rate limits > Status 429",
        "A client that sends requests too quickly gets status 429 with a Retry-After header "
        "naming how many seconds to wait; nothing is searched for that request.",
    ),
    CorpusChunk(
        "c-budget",
        "rate-limits.md",
        "https://docs.example/rate-limits",
        "Rate limits",
        "Rate limits > Daily budget",
        "The deployment has a daily budget of searches. Once it is spent, further requests "
        "are refused until midnight UTC.",
    ),
    CorpusChunk(
        "c-ports",
        "deployment.md",
        "https://docs.example/deployment",
        "Deployment",
        "Deployment > Ports",
        "The gateway listens on port 8080 by default. The Retriever answers gRPC on port "
        "50052; set RAG_RETRIEVER_ADDR when it runs elsewhere.",
    ),
    CorpusChunk(
        "c-fusion",
        "embeddings.md",
        "https://docs.example/embeddings",
        "Embeddings",
        "Embeddings > Hybrid search",
        "Vector search and BM25 run in parallel; reciprocal rank fusion merges the two ranked "
        "lists before a cross-encoder reranks the top candidates under a deadline.",
    ),
    CorpusChunk(
        "c-chunks",
        "chunking.md",
        "https://docs.example/chunking",
        "Chunking",
        "Chunking > Sizes",
        "Documents are split into chunks of about 800 characters with 200 characters of "
        "overlap, at headings, paragraphs or sentence ends.",
    ),
)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def _highlights(wanted: set[str], text: str) -> list[pb.Span]:
    """Where the query's words occur in `text`, as the real Retriever reports them."""
    return [
        pb.Span(start=m.start(), end=m.end())
        for m in re.finditer(r"[A-Za-z0-9]+", text)
        if m.group().lower() in wanted
    ]


def canned_response(request: pb.RetrieveRequest) -> pb.RetrieveResponse:
    """A realistic RetrieveResponse drawn from CORPUS by plain word overlap."""
    wanted = _words(request.query)
    on_page = request.intent == pb.INTENT_CURRENT_PAGE
    urls = [request.page_url] if on_page else list(request.filter.urls)
    pool = [c for c in CORPUS if not urls or c.url in urls]
    scored = sorted(
        ((len(wanted & _words(c.title + " " + c.text)), c) for c in pool),
        key=lambda pair: -pair[0],
    )
    chosen = [c for score, c in scored if score > 0][: request.top_k or 5]
    hits, citations, blocks = [], [], []
    for rank, chunk in enumerate(chosen, start=1):
        fused = 1 / (60 + rank) + 1 / (60 + rank + 1)
        hits.append(
            pb.Hit(
                chunk_id=chunk.chunk_id,
                doc_id=chunk.doc_id,
                url=chunk.url,
                title=chunk.title,
                heading_path=chunk.heading_path,
                text=chunk.text,
                highlights=_highlights(wanted, chunk.text),
                rank=rank,
                score=0.9 / rank,
                fused_score=fused,
                reranked=True,
                rerank_score=0.9 / rank,
                scope_id="docs",
                locale="en",
                channels=[
                    pb.ChannelMatch(channel=pb.CHANNEL_VECTOR, rank=rank, score=0.8 / rank),
                    pb.ChannelMatch(channel=pb.CHANNEL_LEXICAL, rank=rank + 1, score=7.5 / rank),
                ],
            )
        )
        citations.append(
            pb.Citation(
                number=rank,
                chunk_id=chunk.chunk_id,
                doc_id=chunk.doc_id,
                url=chunk.url,
                title=chunk.title,
                heading_path=chunk.heading_path,
            )
        )
        blocks.append(f"[{rank}] {chunk.title} ({chunk.url})\n{chunk.text}")
    evidence_text = "\n\n".join(blocks)
    response = pb.RetrieveResponse(
        hits=hits,
        query_language=request.query_language or "en",
        intent=pb.INTENT_CURRENT_PAGE if on_page else pb.INTENT_SITE_SEARCH,
        page_status=pb.PAGE_STATUS_INDEXED if on_page else pb.PAGE_STATUS_UNSPECIFIED,
        rerank=pb.RerankOutcome(
            used=True,
            candidates=len(hits),
            reranked=len(hits),
            model="test-cross-encoder",
            latency_ms=4.2,
        ),
        timings=[pb.StageTiming(stage="fanout", ms=1.5), pb.StageTiming(stage="rerank", ms=4.2)],
        evidence=pb.Evidence(text=evidence_text, citations=citations, chars=len(evidence_text)),
    )
    if request.debug:
        response.debug.CopyFrom(
            pb.DebugReport(
                channels=[
                    pb.ChannelReport(
                        channel=pb.CHANNEL_VECTOR,
                        status=pb.CHANNEL_STATUS_OK,
                        latency_ms=0.6,
                        hits=len(hits),
                    ),
                    pb.ChannelReport(
                        channel=pb.CHANNEL_LEXICAL,
                        status=pb.CHANNEL_STATUS_OK,
                        latency_ms=0.4,
                        hits=len(hits),
                    ),
                ],
                normalized_query=request.query,
                lexical_query=request.query,
            )
        )
    return response


class ScriptedRetriever(retriever_pb2_grpc.RetrieverServicer):
    """TEST-ONLY fault/behaviour-injection double of the Retriever.

    It stands in for the real Retriever so gate tests can assert what reached
    downstream ("the Retriever saw nothing"), and can be told to fail
    (`fail_with`; `fail_for_query`: only requests with that exact query) or
    to be slow (`delay_s`). Its answers come from CORPUS,
    or are the one set in `reply_with`; `index_status` is what IndexStatus
    answers (None: UNIMPLEMENTED, as an older Retriever would), unless
    `status_fail_with` makes it fail.
    """

    def __init__(self) -> None:
        self.requests: list[pb.RetrieveRequest] = []
        self.time_remaining: list[float | None] = []
        self.fail_with: grpc.StatusCode | None = None
        self.fail_for_query: dict[str, grpc.StatusCode] = {}
        self.delay_s = 0.0
        self.reply_with: pb.RetrieveResponse | None = None  # instead of the canned answer
        self.index_status: pb.IndexStatusResponse | None = None  # None: UNIMPLEMENTED
        self.status_calls = 0
        self.status_fail_with: grpc.StatusCode | None = None

    @property
    def calls(self) -> int:
        return len(self.requests)

    def reset(self) -> None:
        self.requests.clear()
        self.time_remaining.clear()
        self.fail_with = None
        self.fail_for_query.clear()
        self.delay_s = 0.0
        self.reply_with = None
        self.index_status = None
        self.status_calls = 0
        self.status_fail_with = None

    async def Retrieve(
        self, request: pb.RetrieveRequest, context: grpc.aio.ServicerContext
    ) -> pb.RetrieveResponse:
        self.requests.append(request)
        self.time_remaining.append(context.time_remaining())
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_with is not None:
            await context.abort(self.fail_with, "injected failure")
        if request.query in self.fail_for_query:
            await context.abort(self.fail_for_query[request.query], "injected failure")
        return self.reply_with if self.reply_with is not None else canned_response(request)

    async def IndexStatus(
        self, request: pb.IndexStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.IndexStatusResponse:
        self.status_calls += 1
        if self.status_fail_with is not None:
            await context.abort(self.status_fail_with, "injected failure")
        if self.index_status is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "no scripted index status")
        assert self.index_status is not None
        return self.index_status


@dataclass
class RetrieverServer:
    servicer: ScriptedRetriever
    server: GrpcServer
    addr: str


@contextlib.asynccontextmanager
async def serve_retriever() -> AsyncIterator[RetrieverServer]:
    servicer = ScriptedRetriever()
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=0), [RETRIEVER_SERVICE])
    retriever_pb2_grpc.add_RetrieverServicer_to_server(servicer, server.server)
    port = await server.start()
    await server.set_serving(True)
    try:
        yield RetrieverServer(servicer, server, f"127.0.0.1:{port}")
    finally:
        await server.stop()


def gateway_settings(retriever_addr: str, **overrides: Any) -> GatewaySettings:
    """Settings for a public, permissive gateway; tests tighten one gate at a time."""
    values: dict[str, Any] = {
        "retriever_addr": retriever_addr,
        "gateway_public_enabled": True,
        "gateway_allowed_origins": [ALLOWED_ORIGIN],
        "gateway_rate_limit": "1000/second",
        "gateway_daily_budget": 1_000_000,
        "gateway_breaker_fail_max": 3,
        "gateway_breaker_reset_s": 1.0,
        "gateway_request_deadline_s": 2.0,
        # A health answer may wait on a loaded CI machine (a first /readyz past
        # the 1 s default said 503 there); tests of the timeout set their own.
        "gateway_readiness_timeout_s": 15.0,
        "gateway_metrics_port": 0,  # a free port: tests run side by side
    }
    values.update(overrides)
    return GatewaySettings(**values)


@dataclass
class RunningGateway:
    url: str
    app: FastAPI
    server: uvicorn.Server = field(repr=False)

    @property
    def metrics_url(self) -> str:
        """Where the app's own metrics listener serves /metrics."""
        url = self.app.state.metrics_url
        assert url, "the metrics listener is off"
        return str(url)


@contextlib.asynccontextmanager
async def serve_gateway(
    settings: GatewaySettings, tracing: Tracing | None = None
) -> AsyncIterator[RunningGateway]:
    """The gateway app behind a real uvicorn on a free loopback port."""
    app = create_app(settings, tracing=tracing)
    async with serve_asgi(app) as (url, server):
        yield RunningGateway(url, app, server)


@contextlib.asynccontextmanager
async def serve_asgi(app: Any) -> AsyncIterator[tuple[str, uvicorn.Server]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # As `python -m gateway` runs it: forwarded headers are the app's business
    # (uvicorn's default would trust X-Forwarded-For from loopback).
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="on", proxy_headers=False
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # raises why start-up failed
                raise RuntimeError("uvicorn exited during start-up")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()


@dataclass
class RedisServer:
    url: str
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def run_redis_server(workdir: Path) -> Iterator[RedisServer]:
    """A real redis-server (the Debian package) on a free loopback port."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server")
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, process)
        yield RedisServer(f"redis://127.0.0.1:{port}/0", process)
    finally:
        process.terminate()
        process.wait(timeout=10)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise TimeoutError(f"redis-server did not listen on {port}")
