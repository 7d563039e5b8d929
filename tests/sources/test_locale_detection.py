"""Each page of a folder gets its own locale: tag form, folder names, script,
and the order of the sources in the directory loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.models import Document
from services.indexer.validation import check_locale_tag
from services.sources.html_head import Alternate, read_html_head
from services.sources.loaders import load_directory
from services.sources.locale_detection import (
    PathLocales,
    _prose,
    _without_fenced_code,
    normalize_tag,
    script_locale,
)

pytestmark = pytest.mark.unit

CHINESE = "这个页面介绍如何安装和配置服务，包括端口、证书和日志的设置方法。\n"
ENGLISH = "This page explains how to install and configure the service, its ports and logs.\n"


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("zh-cn", "zh-CN"),
        ("ZH_CN", "zh-CN"),
        ("EN", "en"),
        (" en-us ", "en-US"),
        ("zh-hans", "zh-Hans"),
        ("zh_hant_tw", "zh-Hant-TW"),
        ("es-419", "es-419"),
        ("en-US-u-ca-gregory", "en-US"),  # the extension refines, the locale stays
        ("de-DE-1901-x-a", "de-DE-1901"),
        ("fil", "fil"),
    ],
)
def test_tags_take_one_spelling(written: str, canonical: str) -> None:
    assert normalize_tag(written) == canonical
    check_locale_tag("locale", canonical)  # the Indexer accepts what the loader makes


@pytest.mark.parametrize("written", ["", "und", "x-default", "中文", "english", "e", "en--us"])
def test_what_is_not_a_language_tag(written: str) -> None:
    assert normalize_tag(written) is None


def test_locale_folders_are_read_conservatively() -> None:
    paths = [
        "en/a.md", "zh-CN/a.md", "zh_cn/b.md", "zh-Hans/c.md", "ja/d.md", "pt-BR/e.md",
        "go/f.md", "api/g.md", "en-docs/h.md", "content/zh-CN/guide/i.md", "en.md",
        "it/j.md", "tools/it/k.md", "tools/ml/l.md", "lang/it/m.md", "lang/fr/n.md",
    ]  # fmt: skip
    folders = PathLocales(paths)
    found = {p: folders.locale_of(p) for p in paths}
    assert found == {
        "en/a.md": "en", "zh-CN/a.md": "zh-CN", "zh_cn/b.md": "zh-CN", "zh-Hans/c.md": "zh-Hans",
        "ja/d.md": "ja", "pt-BR/e.md": "pt-BR", "go/f.md": None, "api/g.md": None,
        "en-docs/h.md": None, "content/zh-CN/guide/i.md": "zh-CN", "en.md": None,
        # `it/` beside `en/` is Italian; `it/` and `ml/` among tools are folders.
        "it/j.md": "it", "tools/it/k.md": None, "tools/ml/l.md": None,
        "lang/it/m.md": "it", "lang/fr/n.md": "fr",
    }  # fmt: skip
    assert folders.neutral_path("content/zh-CN/guide/i.md") == "content/guide/i.md"
    assert folders.neutral_path("go/f.md") == "go/f.md"


def test_a_locale_in_a_file_name_counts_beside_a_twin() -> None:
    paths = [
        "button/README.md", "button/README.en-US.md",  # mand-mobile, dumi
        "guide/index.zh-CN.md", "guide/index.en-US.md",
        "about.md", "about.fr.md", "about.it.md",  # Hugo: `it` beside a sure `fr`
        "notes.md", "notes.it.md",  # `it` beside no sure tag: a word
        "lone.fr.md",  # no twin
        "setup.py.md", "setup.md", "v1.2.md", "v1.md",  # not languages
        "zh-CN/x.md", "en/x.md", "en/y.zh-CN.md", "en/y.md",  # a folder first
    ]  # fmt: skip
    names = PathLocales(paths)
    found = {p: names.locale_of(p) for p in paths if names.locale_of(p)}
    assert found == {
        "button/README.en-US.md": "en-US", "guide/index.zh-CN.md": "zh-CN",
        "guide/index.en-US.md": "en-US", "about.fr.md": "fr", "about.it.md": "it",
        "zh-CN/x.md": "zh-CN", "en/x.md": "en", "en/y.zh-CN.md": "en", "en/y.md": "en",
    }  # fmt: skip
    assert names.neutral_path("button/README.en-US.md") == "button/README.md"
    assert names.neutral_path("guide/index.zh-CN.md") == "guide/index.md"
    assert names.neutral_path("about.fr.md") == "about.md"
    assert names.neutral_path("notes.it.md") == "notes.it.md"
    assert names.neutral_path("button/README.md") == "button/README.md"


def test_a_country_code_sites_name_chinese_by_is_read_as_its_language() -> None:
    """Nextra's SWR site names its Chinese pages `getting-started.cn.mdx`;
    some sites keep them in `cn/` beside `en/`."""
    paths = ["docs/start.mdx", "docs/start.cn.mdx", "cn/a.md", "en/a.md", "x/cn/b.md", "y.jp.md"]
    found = PathLocales(paths)
    # `x/cn/` has no sibling locale folder, `y.jp.md` no twin: ordinary names.
    assert [found.locale_of(p) for p in paths] == [None, "zh-CN", "zh-CN", "en", None, None]
    assert found.neutral_path("docs/start.cn.mdx") == "docs/start.mdx"


def test_a_docusaurus_translation_s_neutral_path_is_the_page_it_translates() -> None:
    i18n = "site/i18n/zh-Hans/docusaurus-plugin-content-"
    paths = [
        f"{i18n}docs/current/guide/a.md", f"{i18n}docs/version-2.0/a.md",
        f"{i18n}blog/post.md", f"{i18n}pages/about.md", f"{i18n}docs/other/a.md",
        "site/docs/guide/a.md",
    ]  # fmt: skip
    folders = PathLocales(paths)
    assert [folders.neutral_path(p) for p in paths] == [
        "site/docs/guide/a.md", "site/versioned_docs/version-2.0/a.md", "site/blog/post.md",
        "site/src/pages/about.md", "site/i18n/docusaurus-plugin-content-docs/other/a.md",
        "site/docs/guide/a.md",
    ]  # fmt: skip
    assert folders.locale_of(paths[0]) == "zh-Hans"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (CHINESE + "运行 `rag-indexer ingest docs/ --scope handbook` 即可。\n", "zh"),
        ("# 安装\n\n```python\nimport client\nclient.run(port=8080, verbose=True)\n```\n"
         + CHINESE, "zh"),  # code is English whatever the page's language
        ("このページではサービスのインストール方法を説明します。"
         "設定ファイルを編集してください。", "ja"),
        ("이 페이지는 서비스 설치 방법을 설명합니다. 설정 파일을 편집하세요.", "ko"),
        (ENGLISH + "In Chinese it is called 安装.\n", "en"),
        ("```sh\nmake run\nmake test\n```\n\n| 1 | 2 |\n", None),  # nothing to tell
        ("Эта страница объясняет, как установить и настроить сервис.", None),
    ],
)  # fmt: skip
def test_script_names_the_language(text: str, expected: str | None) -> None:
    assert script_locale(text) == expected


def test_fenced_code_is_left_out_only_where_it_closes() -> None:
    code = "```\n" + "print('hello world, this is code')\n" * 20 + "```\n"
    assert script_locale(CHINESE + code) == "zh"
    assert script_locale(CHINESE[:20] + "\n```\n" + ENGLISH * 5) == "en"  # never closed: prose
    assert script_locale("~~~~\n" + ENGLISH + "\n~~~\n~~~~~\n" + CHINESE) == "zh"
    assert _without_fenced_code("````\ncode\n```\nprose") == "````\ncode\n```\nprose"


@pytest.mark.timeout(120)  # the hang guard (a pattern searched to the end from each: hours)
def test_many_unclosed_fences_are_read_in_linear_time() -> None:
    text = "```x\n" * 200_000
    assert _without_fenced_code(text) == text
    assert _without_fenced_code(text + "```\n") == " \n"


@pytest.mark.timeout(120)  # the hang guard: `\S+://` tried from every character took minutes
def test_a_long_word_without_an_address_is_read_in_linear_time() -> None:
    word = "ab" * 200_000
    assert _prose(f"{word} see https://x.test/a") == f"{word} see  "


def test_html_head_gives_lang_and_alternates() -> None:
    head = read_html_head(
        '<!doctype html><html LANG="zh-cn"><head>'
        '<link rel="alternate" hreflang="en" href="/en/a.html">'
        '<link rel="stylesheet" href="x.css"><link rel="alternate" href="/feed.xml">'
        '</head><body><link rel="alternate" hreflang="fr" href="/fr/a.html"></body></html>'
    )
    assert head.lang == "zh-cn"
    assert head.alternates == (Alternate("en", "/en/a.html"),)
    assert read_html_head('<html xml:lang="ja"><p>x').lang == "ja"
    assert read_html_head("<html lang=").lang == ""  # broken markup never fails


# ------------------------------------------------------------------ in the loader


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """One page per locale source; each would be another locale by the sources below it."""
    root = tmp_path / "site"
    for folder in ("en", "zh-CN", "misc"):
        (root / folder).mkdir(parents=True)
    pages = {
        "en/front-lang.md": "---\nlang: zh_cn\n---\n# 安装\n\n" + CHINESE,
        "en/front-locale.md": "---\nlocale: JA\n---\n# Setup\n\n" + ENGLISH,
        "en/front-bad.md": "---\nlang: Chinese\n---\n# Setup\n\n" + CHINESE,
        "en/page.html": f'<html lang="zh-Hans"><body><p>{ENGLISH}</p></body></html>',
        "zh-CN/english-text.md": "# Setup\n\n" + ENGLISH,
        "misc/chinese.md": "# 说明\n\n" + CHINESE,
        "misc/english.txt": ENGLISH,
        "misc/code-only.md": "```sh\nmake run\n```\n",
    }
    for relpath, text in pages.items():
        (root / relpath).write_text(text, encoding="utf-8")
    return root


def locales(root: Path, locale: str = "", default_locale: str = "en") -> dict[str, str]:
    items = load_directory(root, scope_id="s", locale=locale, default_locale=default_locale)
    return {i.doc_id: i.locale for i in items if isinstance(i, Document)}


def test_each_page_takes_the_first_source_that_answers(site: Path) -> None:
    assert locales(site) == {
        "en/front-lang.md": "zh-CN",  # front matter `lang`, normalised
        "en/front-locale.md": "ja",  # front matter `locale`
        "en/front-bad.md": "en",  # not a tag: the next source (the folder) answers
        "en/page.html": "zh-Hans",  # <html lang> over the folder
        "zh-CN/english-text.md": "zh-CN",  # the folder over the script
        "misc/chinese.md": "zh",  # the script
        "misc/english.txt": "en",
        "misc/code-only.md": "en",  # nothing tells: the default
    }
    assert locales(site, default_locale="fr")["misc/code-only.md"] == "fr"


def test_an_explicit_locale_overrides_every_page(site: Path) -> None:
    assert set(locales(site, locale="pt_br").values()) == {"pt-BR"}


def test_a_tag_with_a_region_or_script_in_a_file_name_needs_no_twin() -> None:
    """`README.zh_CN` is Chinese (China) with or without its `README`: a
    probe saw removing (or renaming) the twin re-key the page as `zh` by its
    script, re-embedded, and no longer found by a `zh-CN` filter. A bare tag
    still needs its twin (`lone.fr.md` is a name)."""
    alone = ["README.zh_CN", "guide.pt-BR.md", "intro.zh-Hans.md", "lone.fr.md", "x.es-419.md"]
    names = PathLocales(alone)
    assert [names.locale_of(p) for p in alone] == ["zh-CN", "pt-BR", "zh-Hans", None, "es-419"]
    assert names.neutral_path("README.zh_CN") == "README"
    assert names.neutral_path("guide.pt-BR.md") == "guide.md"
    with_twin = PathLocales(["README", "README.zh_CN"])
    assert with_twin.locale_of("README.zh_CN") == "zh-CN"
    assert with_twin.neutral_path("README.zh_CN") == "README"
