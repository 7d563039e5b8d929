"""Channels from the command line to the Indexer and the Retriever, secured
as the environment says (RAG_INDEXER_TOKEN_FILE, RAG_INDEXER_TLS_CA_FILE, …;
see CliSettings)."""

from __future__ import annotations

from typing import Literal

import grpc

from services.indexer.settings import CliSettings
from services.runtime.security.client import ClientSecurity, sync_channel
from services.runtime.server import channel_options
from services.runtime.settings import load_settings

CLI_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def cli_channel(addr: str, target: Literal["indexer", "retriever"]) -> grpc.Channel:
    """Raise ConfigError naming the setting when the TLS or token settings are bad."""
    security = ClientSecurity.from_settings(load_settings(CliSettings), target)
    return sync_channel(addr, security, channel_options(CLI_MAX_MESSAGE_BYTES))
