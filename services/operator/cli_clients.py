"""Clients from the command line to the Indexer and the Retriever, through
the one client layer (rag_client): secured as the environment says
(RAG_INDEXER_TOKEN_FILE, RAG_INDEXER_TLS_CA_FILE, RAG_RETRIEVER_TOKEN, ...;
rag_client.env), each call under the deadline the command gives it, calls
that only read retried on UNAVAILABLE within it."""

from __future__ import annotations

from collections.abc import Mapping

from rag_client import ClientSettings, IndexerClient, RetrieverClient
from rag_client.env import DEFAULT_ADDR
from services.runtime.server import channel_options

CLI_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def cli_settings(service: str, addr: str | None, timeout_s: float) -> ClientSettings:
    """`addr` None: RAG_<SERVICE>_ADDR, else the service's default port on
    localhost (the variable was ignored: `--addr` always had a value, probe).
    Raise rag_client.InvalidSettings naming the variable when it, or a TLS or
    token setting, is bad."""
    options = tuple(channel_options(CLI_MAX_MESSAGE_BYTES))
    overrides: dict[str, object] = {"timeout": timeout_s, "channel_options": options}
    if addr is not None:
        overrides["target"] = addr
    return ClientSettings.from_env(service, None, **overrides)


def indexer_client(addr: str | None, timeout_s: float) -> IndexerClient:
    return IndexerClient(cli_settings("indexer", addr, timeout_s))


def retriever_client(addr: str | None, timeout_s: float) -> RetrieverClient:
    return RetrieverClient(cli_settings("retriever", addr, timeout_s))


def resolved_address(service: str, addr: str | None, environ: Mapping[str, str]) -> str:
    """The address a client built by `cli_settings` dials (for a record)."""
    return addr or environ.get(f"RAG_{service.upper()}_ADDR", "").strip() or DEFAULT_ADDR[service]


def address_help(service: str) -> str:
    """An address option's help: where its value comes from when not given."""
    return (
        f"{service.capitalize()} host:port (default: RAG_{service.upper()}_ADDR, else "
        f"{DEFAULT_ADDR[service]})"
    )
