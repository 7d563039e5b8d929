"""Fault injectors for tests. They wrap the REAL parts (stores, embedder) or
stand in for the Reranker, and fail or stall on demand; they are test-only
and never used by the services."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import grpc

from services.contract.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.contract.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.core.errors import StoreUnavailable

OK, RAISE, HANG = "ok", "raise", "hang"


class FaultySearch:
    """Fault injector around a real store or embedder: in mode RAISE the
    chosen methods raise, in mode HANG they stall for `hang_s` first."""

    def __init__(self, inner: Any, methods: Sequence[str], hang_s: float = 2.0) -> None:
        self.inner = inner
        self.methods = set(methods)
        self.hang_s = hang_s
        self.mode = OK

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name not in self.methods:
            return target

        def injected(*args: Any, **kwargs: Any) -> Any:
            if self.mode == RAISE:
                raise StoreUnavailable(f"injected failure in {name}")
            if self.mode == HANG:
                time.sleep(self.hang_s)
            return target(*args, **kwargs)

        return injected


class RerankerInjector(reranker_pb2_grpc.RerankerServicer):
    """Test-only stand-in for the Reranker, a behaviour/fault injector:
    `reverse` scores the passages so their order flips, `partial` scores only
    the first `partial_n` and marks the reply partial, `slow` ignores the
    deadline and sleeps, `error` fails with INTERNAL."""

    def __init__(self) -> None:
        self.mode = "reverse"
        self.partial_n = 2
        self.slow_s = 2.0
        self.calls = 0

    async def Rerank(
        self, request: pb.RerankRequest, context: grpc.aio.ServicerContext
    ) -> pb.RerankResponse:
        self.calls += 1
        n = len(request.passages)
        if self.mode == "error":
            await context.abort(grpc.StatusCode.INTERNAL, "injected reranker failure")
        if self.mode == "slow":
            await asyncio.sleep(self.slow_s)
        scores = [float(i) for i in range(n)]  # last passage gets the highest score
        if self.mode == "partial":
            return pb.RerankResponse(
                scores=scores[: self.partial_n],
                scored=self.partial_n,
                partial=True,
                stop_reason="deadline",
                model="injector",
            )
        return pb.RerankResponse(scores=scores, scored=n, model="injector")
