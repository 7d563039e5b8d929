"""A client's credentials are read when its service starts: a token file
that cannot be read stops the start, naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.retriever.settings import RetrieverSettings
from services.runtime.security.client import ClientSecurity

pytestmark = pytest.mark.unit


def test_a_token_file_that_cannot_be_read_is_a_configuration_error(tmp_path: Path) -> None:
    """It was read on the first call instead: the Retriever then said its
    healthy Reranker was not serving, the gateway answered every search 500."""
    settings = RetrieverSettings(reranker_token_file=tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"RAG_RERANKER_TOKEN_FILE cannot be read: .*missing"):
        ClientSecurity.from_settings(settings, "reranker")


def test_a_readable_token_file_is_the_token_sent(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret-token\n")
    settings = RetrieverSettings(reranker_token_file=tmp_path / "token")
    security = ClientSecurity.from_settings(settings, "reranker")
    assert security.token.metadata() == (("authorization", "Bearer s3cret-token"),)
