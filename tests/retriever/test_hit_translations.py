"""Each hit carries its page's translations (locale, url, doc_id) from its
`metadata["translations"]`: unit tests of the mapping, and a real stack fed
by the folder loader."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.models import Document
from services.embedding.embedder import Embedder
from services.operator.ingest import document_to_proto
from services.retriever.answer_proto import hit_to_proto
from services.sources.loaders import load_directory
from tests.retriever.factories import hit
from tests.support.stack import BackgroundStack

BASE = "https://docs.example/"


def with_metadata(value: str) -> rpb.Hit:
    fused = hit("c1")
    fused.chunk = replace(fused.chunk, metadata={"translations": value, "path": "en/a.md"})
    return hit_to_proto(fused, 1)


@pytest.mark.unit
def test_a_hit_carries_its_translations_as_written() -> None:
    value = json.dumps(
        [
            {"locale": "ja", "url": "/ja/a.html", "doc_id": "ja/a.md"},
            {"locale": "zh-CN", "url": "https://docs.example/zh-CN/a.html", "doc_id": "zh-CN/a.md"},
        ]
    )
    found = with_metadata(value).translations
    assert [(t.locale, t.url, t.doc_id) for t in found] == [
        ("ja", "/ja/a.html", "ja/a.md"),
        ("zh-CN", "https://docs.example/zh-CN/a.html", "zh-CN/a.md"),
    ]


@pytest.mark.unit
@pytest.mark.parametrize(
    "value", ["", "[", "{}", "null", '[{"locale": "fr", "url": "javascript:alert(1)"}]']
)
def test_malformed_translations_carry_none_and_never_fail(value: str) -> None:
    assert list(with_metadata(value).translations) == []


@pytest.mark.unit
def test_a_hit_without_the_key_has_no_translations() -> None:
    assert list(hit_to_proto(hit("c1"), 1).translations) == []


# ------------------------------------------------------------------ real stack

PAGES = {
    "en/guide/setup.md": "# Setup\n\nInstall the service and open port 8443 for the API.\n",
    "zh-CN/guide/setup.md": "# 安装\n\n安装服务，并为接口开放 8443 端口。\n",
    "en/guide/backup.md": "# Backup\n\nCopy the data folder every night to keep snapshots.\n",
}


@pytest.fixture
def stack(tmp_path: Path, embedder: Embedder) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(tmp_path / "data", embedder).start()
    yield stack
    stack.stop()


def ingest(stack: BackgroundStack, site: Path) -> dict[str, int]:
    docs = [d for d in load_directory(site, scope_id="site", base_url=BASE)]
    assert all(isinstance(d, Document) for d in docs)
    reply = stack.upsert([document_to_proto(d) for d in docs if isinstance(d, Document)])
    return {o.doc_id: o.state for o in reply.outcomes}


def top(stack: BackgroundStack, query: str, locale: str) -> rpb.Hit:
    reply = stack.retrieve(
        query, top_k=3, filter=rpb.ScopeFilter(scope_id="site", locale=locale), disable_rerank=True
    )
    return reply.hits[0]


def pairs(found: rpb.Hit) -> list[tuple[str, str, str]]:
    return [(t.locale, t.url, t.doc_id) for t in found.translations]


@pytest.mark.integration
def test_a_bilingual_folder_gives_each_hit_its_translations(
    stack: BackgroundStack, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    for relpath, text in PAGES.items():
        (site / relpath).parent.mkdir(parents=True, exist_ok=True)
        (site / relpath).write_text(text, encoding="utf-8")
    assert set(ingest(stack, site).values()) == {ipb.DOCUMENT_STATE_ADDED}

    en = top(stack, "which port does the API use", "en")
    assert (en.doc_id, en.locale) == ("en/guide/setup.md", "en")
    assert pairs(en) == [("zh-CN", BASE + "zh-CN/guide/setup.md", "zh-CN/guide/setup.md")]
    zh = top(stack, "接口 端口", "zh-CN")
    assert zh.doc_id == "zh-CN/guide/setup.md"
    assert pairs(zh) == [("en", BASE + "en/guide/setup.md", "en/guide/setup.md")]
    assert list(top(stack, "nightly snapshots of the data folder", "en").translations) == []

    # A third language: its partners' translations change, and only their
    # metadata is rewritten (nothing is re-embedded).
    ja = site / "ja" / "guide" / "setup.md"
    ja.parent.mkdir(parents=True)
    ja.write_text("# セットアップ\n\nサービスをインストールし、8443 番ポートを開きます。\n")
    states = ingest(stack, site)
    assert states == {
        "en/guide/setup.md": ipb.DOCUMENT_STATE_METADATA_ONLY,
        "zh-CN/guide/setup.md": ipb.DOCUMENT_STATE_METADATA_ONLY,
        "ja/guide/setup.md": ipb.DOCUMENT_STATE_ADDED,
        "en/guide/backup.md": ipb.DOCUMENT_STATE_UNCHANGED,
    }
    en = top(stack, "which port does the API use", "en")
    assert [t.locale for t in en.translations] == ["ja", "zh-CN"]


@pytest.mark.integration
def test_an_api_caller_sets_the_key_itself_and_a_bad_value_costs_nothing(
    stack: BackgroundStack,
) -> None:
    links = json.dumps(
        [{"locale": "de", "url": "https://docs.example/de/rotate", "doc_id": "de/rotate"}]
    )
    docs = [
        ipb.Document(
            doc_id="rotate", scope_id="api", locale="en", url="https://docs.example/en/rotate",
            text="# Rotate keys\n\nRotate the signing keys every ninety days.",
            metadata={"translations": links},
        ),
        ipb.Document(
            doc_id="revoke", scope_id="api", locale="en", url="https://docs.example/en/revoke",
            text="# Revoke keys\n\nRevoke a leaked signing key at once.",
            metadata={"translations": "[{not json"},
        ),
    ]  # fmt: skip
    assert stack.upsert(docs).counts.added == 2
    reply = stack.retrieve("signing keys", top_k=5, filter=rpb.ScopeFilter(scope_id="api"))
    by_doc = {h.doc_id: pairs(h) for h in reply.hits}
    assert by_doc == {
        "rotate": [("de", "https://docs.example/de/rotate", "de/rotate")],
        "revoke": [],
    }
