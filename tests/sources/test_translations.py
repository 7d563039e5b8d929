"""Pages that translate each other share `metadata["translation_key"]`: by
path under locale folders, by hreflang alternates, by a front-matter key."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.models import Document
from services.core.translation_links import TRANSLATIONS_KEY, decode_translations
from services.sources.loaders import load_directory
from services.sources.translations import (
    TRANSLATION_KEY,
    PageLinks,
    Translation,
    resolve_href,
    translation_keys,
    translations_of,
)

pytestmark = pytest.mark.unit


def write(root: Path, pages: dict[str, str]) -> None:
    for relpath, text in pages.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(text, encoding="utf-8")


def load(root: Path, base_url: str = "") -> dict[str, Document]:
    items = load_directory(root, scope_id="s", base_url=base_url)
    return {i.doc_id: i for i in items if isinstance(i, Document)}


def keys(docs: dict[str, Document]) -> dict[str, str]:
    return {d.doc_id: d.metadata[TRANSLATION_KEY] for d in docs.values() if d.metadata.get(
        TRANSLATION_KEY)}  # fmt: skip


def test_same_path_under_two_locale_folders(tmp_path: Path) -> None:
    write(tmp_path, {
        "en/guide/setup.md": "# Setup\n\nInstall it.\n",
        "zh-CN/guide/setup.md": "# 安装\n\n安装服务。\n",
        "en/guide/only-english.md": "# Only\n\nNo translation.\n",
        "go/guide/setup.md": "# Go\n\nNot a locale folder.\n",
    })  # fmt: skip
    docs = load(tmp_path)
    assert keys(docs) == {"en/guide/setup.md": "guide/setup.md",
                          "zh-CN/guide/setup.md": "guide/setup.md"}  # fmt: skip
    found = translations_of(docs.values())
    assert found[("s", "en/guide/setup.md", "en")] == (
        Translation("zh-CN", "zh-CN/guide/setup.md", "zh-CN/guide/setup.md"),
    )
    assert found[("s", "zh-CN/guide/setup.md", "zh-CN")][0].locale == "en"
    assert found[("s", "en/guide/only-english.md", "en")] == ()


def test_hreflang_alternates_link_html_pages(tmp_path: Path) -> None:
    head = '<html lang="{lang}"><head>{links}</head><body><h1>{title}</h1></body></html>'
    links = (
        '<link rel="alternate" hreflang="zh-CN" href="https://example.com/docs/zh/guanyu/">'
        '<link rel="alternate" hreflang="ja" href="../ja/about.html">'
        '<link rel="alternate" hreflang="fr" href="https://other.example/fr/about.html">'
    )
    write(tmp_path, {
        "en/about.html": head.format(lang="en", links=links, title="About"),
        "zh/guanyu/index.html": head.format(lang="zh-CN", links="", title="关于"),
        "ja/about.html": head.format(lang="ja", links="", title="概要"),
    })  # fmt: skip
    docs = load(tmp_path, base_url="https://example.com/docs/")
    # No shared path: the group's key is the smallest path key of its pages.
    assert keys(docs) == dict.fromkeys(docs, "about.html")
    found = translations_of(docs.values())[("s", "en/about.html", "en")]
    assert [(t.locale, t.doc_id) for t in found] == [
        ("ja", "ja/about.html"), ("zh-CN", "zh/guanyu/index.html"),
    ]  # fmt: skip
    assert found[1].url == "https://example.com/docs/zh/guanyu/index.html"


@pytest.mark.parametrize("field", ["translation_key", "translationKey"])
def test_front_matter_key_links_pages_with_other_paths(tmp_path: Path, field: str) -> None:
    write(tmp_path, {
        "en/install.md": f"---\n{field}: install\n---\n# Install\n",
        "zh-CN/anzhuang.md": "---\ntranslation_key: install\n---\n# 安装\n",
        "en/alone.md": f"---\n{field}: alone\n---\n# Alone\n",
    })  # fmt: skip
    assert keys(load(tmp_path)) == {
        "en/install.md": "install", "zh-CN/anzhuang.md": "install",
        "en/alone.md": "alone",  # declared: kept, though it has no translation yet
    }  # fmt: skip


def test_a_declared_key_replaces_the_path_as_in_hugo(tmp_path: Path) -> None:
    write(tmp_path, {
        "en/a.md": "---\ntranslationKey: first\n---\n# A\n",
        "zh-CN/a.md": "# 甲\n",  # same path, but its key is its path: not linked
        "en/b.md": "---\ntranslationKey: b.md\n---\n# B\n",
        "zh-CN/b.md": "# 乙\n",  # a declared key equal to a path key links, as in Hugo
    })  # fmt: skip
    assert keys(load(tmp_path)) == {"en/a.md": "first", "en/b.md": "b.md", "zh-CN/b.md": "b.md"}


def test_a_very_long_path_key_is_bounded() -> None:
    long_path = "/".join(["section"] * 60) + "/page.md"
    pages = [PageLinks("en/" + long_path, long_path, False), PageLinks("ja/" + long_path,
             long_path, False)]  # fmt: skip
    found = set(translation_keys(pages).values())
    assert len(found) == 1 and next(iter(found)).startswith("sha256:")


@pytest.mark.parametrize(
    ("href", "base_url", "expected"),
    [
        ("../../zh-CN/guide/setup.html", "", "zh-CN/guide/setup.html"),
        ("/zh-CN/guide/setup.html?x=1#top", "", "zh-CN/guide/setup.html"),
        ("https://example.com/zh-CN/guide/setup", "", "zh-CN/guide/setup.html"),
        ("https://example.com/docs/zh-CN/", "https://example.com/docs", "zh-CN/index.html"),
        ("https://example.com/elsewhere/zh-CN/", "https://example.com/docs/", None),
        ("../../../../etc/passwd", "", None),
        ("mailto:a@example.com", "", None),
        ("#top", "", "en/guide/setup.html"),
    ],
)
def test_resolve_href(href: str, base_url: str, expected: str | None) -> None:
    known = {"zh-CN/guide/setup.html", "zh-CN/index.html", "en/guide/setup.html"}
    assert resolve_href(href, "en/guide/setup.html", base_url, known) == expected


def test_translations_stay_in_their_scope_and_skip_the_same_locale() -> None:
    def doc(doc_id: str, locale: str, scope: str = "a") -> Document:
        return Document(doc_id, "x", locale=locale, scope_id=scope,
                        metadata={TRANSLATION_KEY: "k"})  # fmt: skip

    docs = [doc("en/k", "en"), doc("en-US/k", "en-US"), doc("zh/k", "zh"), doc("zh/k2", "zh"),
            doc("zh/k", "zh", scope="b"), Document("plain", "x")]  # fmt: skip
    found = translations_of(docs)
    assert [t.doc_id for t in found[("a", "en/k", "en")]] == ["en-US/k", "zh/k", "zh/k2"]
    assert [t.doc_id for t in found[("a", "zh/k", "zh")]] == ["en/k", "en-US/k"]
    assert found[("b", "zh/k", "zh")] == () and found[("", "plain", "en")] == ()


def test_a_page_that_cannot_be_read_now_keeps_its_partners_links(tmp_path: Path) -> None:
    """Half-saved (cut inside a character): the load reports it and --sync
    removes nothing, so its indexed version stays; its translation must keep
    naming it. A probe found the partner rewritten without the link, while
    the stale page still named the partner."""
    write(tmp_path, {"en/guide.md": "# Guide\n\nInstall it.\n"})
    (tmp_path / "zh-CN").mkdir()
    (tmp_path / "zh-CN" / "guide.md").write_bytes("# 指南\n\n安装服务".encode()[:-1])
    items = list(load_directory(tmp_path, scope_id="s"))
    assert [i.source for i in items if not isinstance(i, Document)] == ["zh-CN/guide.md"]
    (english,) = [i for i in items if isinstance(i, Document)]
    assert english.metadata[TRANSLATION_KEY] == "guide.md"
    linked = decode_translations(english.metadata[TRANSLATIONS_KEY])
    assert [(t.locale, t.doc_id) for t in linked] == [("zh-CN", "zh-CN/guide.md")]
