"""Clients from the command line to the Indexer and the Retriever, through
the one client layer (rag_client): secured as the environment says
(RAG_INDEXER_TOKEN_FILE, RAG_INDEXER_TLS_CA_FILE, RAG_RETRIEVER_TOKEN, ...;
rag_client.env), each call under the deadline the command gives it, calls
that only read retried on UNAVAILABLE within it."""

from __future__ import annotations

from rag_client import ClientSettings, IndexerClient, RetrieverClient
from services.runtime.server import channel_options

CLI_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def cli_settings(service: str, addr: str, timeout_s: float) -> ClientSettings:
    """Raise rag_client.InvalidSettings naming the variable when TLS or token settings are bad."""
    options = tuple(channel_options(CLI_MAX_MESSAGE_BYTES))
    return ClientSettings.from_env(service, target=addr, timeout=timeout_s, channel_options=options)


def indexer_client(addr: str, timeout_s: float) -> IndexerClient:
    return IndexerClient(cli_settings("indexer", addr, timeout_s))


def retriever_client(addr: str, timeout_s: float) -> RetrieverClient:
    return RetrieverClient(cli_settings("retriever", addr, timeout_s))
