"""Indexer settings refused when they load, naming the variables, instead of
starting a service that refuses every document (probe, 2026-12-06)."""

from __future__ import annotations

import pytest

from services.core.errors import ConfigError
from services.indexer.settings import IndexerSettings
from services.indexer.validation import DocumentLimits
from services.runtime.settings import load_settings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value", ["*", "english", "en,*", "en_US"])
def test_allowed_locales_must_be_language_tags(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RAG_ALLOWED_LOCALES", value)
    with pytest.raises(ConfigError, match=r"RAG_ALLOWED_LOCALES.*language tag"):
        load_settings(IndexerSettings)


def test_allowed_locales_as_tags_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_ALLOWED_LOCALES", " en , zh-CN,,pt-br ")
    limits = DocumentLimits.from_settings(load_settings(IndexerSettings))
    assert limits.allowed_locales == {"en", "zh-CN", "pt-BR"}


@pytest.mark.parametrize(("target", "overlap", "refused"), [(800, 400, True), (800, 399, False)])
def test_the_overlap_stays_under_half_the_target(
    monkeypatch: pytest.MonkeyPatch, target: int, overlap: int, refused: bool
) -> None:
    """Refused by the chunker too, but only after the model loaded and in its
    own words (`overlap_chars`), not the variables'."""
    monkeypatch.setenv("RAG_CHUNK_TARGET_CHARS", str(target))
    monkeypatch.setenv("RAG_CHUNK_OVERLAP_CHARS", str(overlap))
    if not refused:
        assert load_settings(IndexerSettings).chunk_overlap_chars == overlap
        return
    with pytest.raises(ConfigError, match=r"RAG_CHUNK_OVERLAP_CHARS=400.*RAG_CHUNK_TARGET_CHARS"):
        load_settings(IndexerSettings)
