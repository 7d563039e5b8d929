"""The folder loader writes each linked page's translations into
`metadata["translations"]`: for every source of linking, with the locale each
page will have, within the metadata value limit."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from services.core.models import Document
from services.indexer.validation import DocumentLimits, validate_document
from services.sources import site_loader
from services.sources.loaders import load_directory
from services.sources.translations import TRANSLATIONS_KEY, translations_of

pytestmark = pytest.mark.unit

BASE = "https://example.com/docs/"


def write(root: Path, pages: dict[str, str]) -> None:
    for relpath, text in pages.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(text, encoding="utf-8")


def load(root: Path, **options: object) -> dict[str, Document]:
    items = load_directory(root, scope_id="s", base_url=BASE, **options)  # type: ignore[arg-type]
    return {i.doc_id: i for i in items if isinstance(i, Document)}


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The relative path of every page the loader reads, in order."""
    reads: list[str] = []
    read_page = site_loader.read_page

    def counting(file: site_loader.SiteFile, fallback_encoding: str) -> object:
        reads.append(file.relpath)
        return read_page(file, fallback_encoding)

    monkeypatch.setattr(site_loader, "read_page", counting)
    return reads


def links(doc: Document) -> list[dict[str, str]]:
    value = doc.metadata.get(TRANSLATIONS_KEY)
    return json.loads(value) if value is not None else []


def test_same_path_under_locale_folders(tmp_path: Path) -> None:
    write(tmp_path, {
        "en/guide/setup.md": "# Setup\n\nInstall it.\n",
        "zh-CN/guide/setup.md": "# 安装\n\n安装服务。\n",
        "ja/guide/setup.md": "# セットアップ\n\nインストールします。\n",
        "en/guide/alone.md": "# Alone\n\nNo translation.\n",
    })  # fmt: skip
    docs = load(tmp_path)
    assert links(docs["en/guide/setup.md"]) == [
        {"locale": "ja", "url": BASE + "ja/guide/setup.md", "doc_id": "ja/guide/setup.md"},
        {"locale": "zh-CN", "url": BASE + "zh-CN/guide/setup.md", "doc_id": "zh-CN/guide/setup.md"},
    ]
    assert [t["locale"] for t in links(docs["zh-CN/guide/setup.md"])] == ["en", "ja"]
    assert TRANSLATIONS_KEY not in docs["en/guide/alone.md"].metadata
    # Compact JSON, and what translations_of computes from the loaded documents.
    value = docs["en/guide/setup.md"].metadata[TRANSLATIONS_KEY]
    assert ", " not in value and ": " not in value
    for doc in docs.values():
        expected = translations_of(docs.values())[("s", doc.doc_id, doc.locale)]
        assert [(t["locale"], t["doc_id"], t["url"]) for t in links(doc)] == list(expected)
        validate_document(doc, DocumentLimits())


def test_a_locale_in_the_file_name_links_the_twins(tmp_path: Path) -> None:
    """mand-mobile's layout: the Chinese README and its English twin
    `README.en-US.md` (Hugo and dumi name translations the same way)."""
    write(tmp_path, {
        "components/button/README.md": "# Button 按钮\n\n用于开始一个即时操作。\n",
        "components/button/README.en-US.md": "# Button\n\nStarts an action at once.\n",
        "components/tip/README.md": "# Tip 提示\n\n用于展示一段提示文字。\n",
    })  # fmt: skip
    docs = load(tmp_path)
    english = docs["components/button/README.en-US.md"]
    assert english.locale == "en-US"
    assert docs["components/button/README.md"].locale == "zh"  # by its script
    assert links(english) == [
        {
            "locale": "zh",
            "url": BASE + "components/button/README.md",
            "doc_id": "components/button/README.md",
        }
    ]
    assert [t["locale"] for t in links(docs["components/button/README.md"])] == ["en-US"]
    assert TRANSLATIONS_KEY not in docs["components/tip/README.md"].metadata


def test_a_docusaurus_translation_is_linked_to_the_page_it_translates(tmp_path: Path) -> None:
    """Docusaurus keeps translations under `i18n/<locale>/<plugin>/`, not
    beside the pages: docs' `current/` is `docs/`, the blog is `blog/`."""
    write(tmp_path, {
        "docs/intro.md": "# Introduction\n\nWhat the tool does.\n",
        "i18n/zh-Hans/docusaurus-plugin-content-docs/current/intro.md": "# 介绍\n\n工具的用途。\n",
        "blog/2024-05-01-release.md": "# Release 2.0\n\nWhat changed.\n",
        "i18n/zh-Hans/docusaurus-plugin-content-blog/2024-05-01-release.md":
            "# 2.0 版本发布\n\n改了什么。\n",
        "i18n/zh-Hans/docusaurus-plugin-content-docs/current/alone.md": "# 单独\n\n没有原文。\n",
    })  # fmt: skip
    docs = load(tmp_path)
    chinese = "i18n/zh-Hans/docusaurus-plugin-content-docs/current/intro.md"
    assert docs[chinese].locale == "zh-Hans"
    assert [t["doc_id"] for t in links(docs["docs/intro.md"])] == [chinese]
    assert [t["doc_id"] for t in links(docs[chinese])] == ["docs/intro.md"]
    assert [t["locale"] for t in links(docs["blog/2024-05-01-release.md"])] == ["zh-Hans"]
    alone = "i18n/zh-Hans/docusaurus-plugin-content-docs/current/alone.md"
    assert TRANSLATIONS_KEY not in docs[alone].metadata


def test_an_id_prefix_is_in_every_id_and_translation_not_in_urls(tmp_path: Path) -> None:
    """Two sites in two scopes both hold `index.md`, and ids are unique across
    scopes: a prefix keeps them apart, and translations name the prefixed ids."""
    write(
        tmp_path,
        {"en/index.md": "# Home\n\nStart here.\n", "zh-CN/index.md": "# 首页\n\n从这里开始。\n"},
    )
    docs = load(tmp_path, id_prefix="jinja/")
    assert sorted(docs) == ["jinja/en/index.md", "jinja/zh-CN/index.md"]
    english = docs["jinja/en/index.md"]
    assert english.url == BASE + "en/index.md" and english.metadata["path"] == "en/index.md"
    assert links(english) == [
        {"locale": "zh-CN", "url": BASE + "zh-CN/index.md", "doc_id": "jinja/zh-CN/index.md"}
    ]


def test_hreflang_alternates(tmp_path: Path) -> None:
    page = (
        '<html lang="{lang}"><head>{links}</head><body><h1>{title}</h1><p>{text}</p></body></html>'
    )
    alternate = '<link rel="alternate" hreflang="zh-CN" href="https://example.com/docs/zh/guanyu/">'
    write(tmp_path, {
        "en/about.html": page.format(lang="en", links=alternate, title="About", text="Us."),
        "zh/guanyu/index.html": page.format(lang="zh-CN", links="", title="关于", text="我们"),
    })  # fmt: skip
    docs = load(tmp_path)
    assert links(docs["en/about.html"]) == [
        {"locale": "zh-CN", "url": BASE + "zh/guanyu/index.html", "doc_id": "zh/guanyu/index.html"}
    ]
    assert links(docs["zh/guanyu/index.html"]) == [
        {"locale": "en", "url": BASE + "en/about.html", "doc_id": "en/about.html"}
    ]


def test_front_matter_key_with_front_matter_locales(tmp_path: Path) -> None:
    write(tmp_path, {
        "install.md": "---\ntranslationKey: install\nlang: en\n---\n# Install\n\nRun it.\n",
        "anzhuang.md": "---\ntranslation_key: install\nlocale: zh_cn\n---\n# 安装\n\n运行。\n",
    })  # fmt: skip
    docs = load(tmp_path)
    assert docs["anzhuang.md"].locale == "zh-CN"
    assert links(docs["install.md"]) == [
        {"locale": "zh-CN", "url": BASE + "anzhuang.md", "doc_id": "anzhuang.md"}
    ]
    assert [t["locale"] for t in links(docs["anzhuang.md"])] == ["en"]


def test_members_whose_script_tells_the_locale_are_read_again_and_only_they(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {
        "install.md": "---\ntranslation_key: install\n---\n# Install\n\nRun the installer now.\n",
        "anzhuang.md": "---\ntranslation_key: install\n---\n# 安装\n\n运行安装程序即可完成。\n",
        "notes.md": "# Notes\n\nA page without any translation at all.\n",
    })  # fmt: skip
    reads = count_reads(monkeypatch)
    docs = load(tmp_path)
    assert (docs["install.md"].locale, docs["anzhuang.md"].locale) == ("en", "zh")
    assert [t["locale"] for t in links(docs["install.md"])] == ["zh"]
    assert [t["locale"] for t in links(docs["anzhuang.md"])] == ["en"]
    # Head pass, the group's members again for their text, then each page once.
    assert sorted(reads) == sorted(["anzhuang.md", "install.md", "notes.md"] * 2
                                   + ["anzhuang.md", "install.md"])  # fmt: skip


def test_locale_folders_are_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"en/a.md": "# A\n\nText.\n", "zh-CN/a.md": "# 甲\n\n文字。\n"})
    reads = count_reads(monkeypatch)
    assert [t["locale"] for t in links(load(tmp_path)["en/a.md"])] == ["zh-CN"]
    assert len(reads) == 4


def test_pages_of_one_locale_are_not_each_others_translations(tmp_path: Path) -> None:
    write(tmp_path, {"en/a.md": "# A\n\nText.\n", "zh-CN/a.md": "# 甲\n\n文字。\n"})
    docs = load(tmp_path, locale="en")  # the operator's --locale: every page is en
    assert all(TRANSLATIONS_KEY not in d.metadata for d in docs.values())
    assert docs["en/a.md"].metadata["translation_key"] == "a.md"


def test_the_loader_owns_the_key_over_front_matter(tmp_path: Path) -> None:
    forged = '[{"locale":"fr","url":"https://evil.example/"}]'
    write(tmp_path, {
        "en/a.md": f"---\ntranslations: '{forged}'\n---\n# A\n\nText.\n",
        "zh-CN/a.md": "# 甲\n\n文字。\n",
        "en/b.md": f"---\ntranslations: '{forged}'\n---\n# B\n\nAlone.\n",
    })  # fmt: skip
    docs = load(tmp_path)
    assert [t["locale"] for t in links(docs["en/a.md"])] == ["zh-CN"]
    assert TRANSLATIONS_KEY not in docs["en/b.md"].metadata


def test_too_many_translations_keep_as_many_as_fit_by_locale_and_say_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tags = ["de", "en", "es", "fr", "it", "ja", "ko", "pt-BR", "ru", "zh-CN", "zh-TW"]
    write(tmp_path, {f"{tag}/guide/a-rather-long-page-name.md": f"# {tag}\n\nText.\n"
                     for tag in tags})  # fmt: skip
    with caplog.at_level(logging.WARNING, logger=site_loader.__name__):
        docs = load(tmp_path, max_translations_chars=400)
    en = docs["en/guide/a-rather-long-page-name.md"]
    value = en.metadata[TRANSLATIONS_KEY]
    kept = [t["locale"] for t in json.loads(value)]
    assert len(value) <= 400 and 0 < len(kept) < len(tags) - 1
    assert kept == [t for t in tags if t != "en"][: len(kept)]
    assert any(
        "en/guide/a-rather-long-page-name.md" in r.getMessage()
        and f"{len(tags) - 1 - len(kept)} of {len(tags) - 1} translations" in r.getMessage()
        for r in caplog.records
    )
    # With the Indexer's default limit the value passes its validation too.
    for doc in load(tmp_path).values():
        assert len(doc.metadata[TRANSLATIONS_KEY]) <= DocumentLimits().max_metadata_value_chars
        validate_document(doc, DocumentLimits())
