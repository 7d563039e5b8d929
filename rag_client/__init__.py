"""A typed Python client for the Retriever (and the Indexer and the Reranker).

    from rag_client import ClientSettings, RetrieverClient, InvalidRequest

    with RetrieverClient(ClientSettings(target="localhost:50052", timeout=5.0)) as client:
        reply = client.retrieve("restore a backup", top_k=3)

Deadlines per call (`deadline=2.0` or a `Deadline`), retries of UNAVAILABLE
only for calls safe to repeat (exponential backoff with jitter, never past the
deadline), TLS / mutual TLS and a bearer token from one validated
`ClientSettings`, and an exception tree rooted at `RagClientError`.
It imports nothing of the services but their generated protobuf stubs.
Guide: docs/client.md."""

from rag_client.deadline import Deadline
from rag_client.errors import (
    Aborted,
    CallError,
    ClientClosed,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidRequest,
    InvalidSettings,
    NotFound,
    OtherCallError,
    PermissionDenied,
    RagClientError,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    WrongEventLoop,
)
from rag_client.indexer import AsyncIndexerClient, IndexerClient
from rag_client.requests import RetrieveOptions, scope_filter
from rag_client.reranker import AsyncRerankerClient, RerankerClient
from rag_client.retriever import AsyncRetrieverClient, RetrieverClient
from rag_client.settings import ClientSettings, RetryPolicy, TlsSettings
from services.contract.genproto.rag.indexer.v1 import indexer_pb2
from services.contract.genproto.rag.retriever.v1 import retriever_pb2

__all__ = [
    "Aborted",
    "AsyncIndexerClient",
    "AsyncRerankerClient",
    "AsyncRetrieverClient",
    "CallError",
    "ClientClosed",
    "ClientSettings",
    "Deadline",
    "DeadlineExceeded",
    "FailedPrecondition",
    "IndexerClient",
    "InvalidRequest",
    "InvalidSettings",
    "NotFound",
    "OtherCallError",
    "PermissionDenied",
    "RagClientError",
    "RerankerClient",
    "ResourceExhausted",
    "RetrieveOptions",
    "RetrieverClient",
    "RetryPolicy",
    "TlsSettings",
    "Unauthenticated",
    "Unavailable",
    "WrongEventLoop",
    "indexer_pb2",
    "retriever_pb2",
    "scope_filter",
]
