"""A Retriever server with no pipeline behind it, as its own process (for
tests that measure the process, e.g. its resident memory): every Retrieve it
is sent must be refused by the request checks, which run before the pipeline.

    python -m tests.support.refusing_retriever PORT

Serves on 127.0.0.1:PORT, with the servers' usual bootstrap (GrpcServer:
interceptors, bounded message size), until SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.retriever.servicer import SERVICE_NAME, RetrieverServicer
from services.runtime.server import GrpcServer, ServerOptions, run_until_signal


async def serve(port: int) -> None:
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=port), [SERVICE_NAME])
    pipeline: Any = None  # never reached: the requests are refused before
    servicer = RetrieverServicer(pipeline, default_deadline_ms=10_000)
    retriever_pb2_grpc.add_RetrieverServicer_to_server(servicer, server.server)
    await server.start()
    await server.set_serving(True)
    await run_until_signal([server])


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
