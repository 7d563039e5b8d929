"""Unit tests for the Markdown cleaning step and the markup-only chunk guard."""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.models import ContentType, Document
from services.indexer.body import normalize_body
from services.indexer.chunking import Chunker, ChunkingParams
from services.indexer.markup import markdown_text
from services.indexer.markup.front_matter import read_front_matter
from services.indexer.markup.html_markdown import html_to_markdown
from services.indexer.markup.markdown_text import MAX_PASSES, clean_markdown, escape_markup
from services.indexer.planning import DocState, Planner, document_chunks, indexable_spans
from services.indexer.settings import IndexerSettings
from services.indexer.validation import DocumentLimits
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.manifest import ManifestEntry

pytestmark = pytest.mark.unit

SMALL = ChunkingParams(target_chars=200, overlap_chars=40, max_slack_chars=60)


# ------------------------------------------------------------------ comments


def test_comments_are_removed_single_and_multi_line() -> None:
    page = """## fs.readFile(path)
<!-- YAML
added: v0.1.29
changes:
  - version: v16.0.0
    pr-url: https://github.com/nodejs/node/pull/37460
    description: The `encoding` option
      became *optional*.
-->

Reads a file.<!-- inline note --> Done <!-- a
two-line comment --> here.
"""
    assert clean_markdown(page) == "## fs.readFile(path)\n\nReads a file. Done  here.\n"


def test_a_block_comment_hides_the_fence_it_contains() -> None:
    page = "Intro.\n\n<!--\n```js\nold();\n```\n-->\n\nAfter.\n"
    assert clean_markdown(page) == "Intro.\n\nAfter.\n"


def test_comments_that_are_not_comments_stay() -> None:
    unclosed = "Text <!-- never closed\n\nmore text\n"
    assert clean_markdown(unclosed) == unclosed
    escaped = "Write \\<!-- x --> to comment.\n"
    assert clean_markdown(escaped) == escaped
    # Inside a paragraph a comment cannot reach past the paragraph's end.
    paragraphs = "a <!-- b\n\nc --> d\n"
    assert clean_markdown(paragraphs) == paragraphs


# ------------------------------------------------------------------ code


def test_code_fences_and_inline_code_stay_verbatim() -> None:
    page = """# Code

Use `<!-- kept -->` and `<b>bold</b>` and ``[a]: b``.

```html
<!-- a comment in a fence survives -->
<details><summary>Kept</summary></details>
[ref]: https://kept.example
```

~~~
<br>
~~~

- A list item with a fence:

    ```
    <b>kept too</b>
    ```
"""
    assert clean_markdown(page) == page


def test_indented_code_stays_but_list_continuation_is_cleaned() -> None:
    page = 'Usage:\n\n    <div class="widget"></div>\n\n- item\n\n    more <b>text</b>\n'
    assert (
        clean_markdown(page)
        == 'Usage:\n\n    <div class="widget"></div>\n\n- item\n\n    more text\n'
    )


def test_a_comment_inside_code_and_a_comment_outside() -> None:
    page = "`<!-- code -->` <!-- gone --> `x`\n"
    assert clean_markdown(page) == "`<!-- code -->`  `x`\n"


# ------------------------------------------------------------------ links


NODE_STYLE = """# util

## util.isArray(object)

Internal alias for [`Array.isArray()`][]. See [the guide][Guide] and [`Error`] and
[`util.inspect()`][inspect].

[`Array.isArray()`]: https://developer.mozilla.org/en-US/docs/Array/isArray
[guide]: ./guide.md "The guide"
   [`Error`]: <errors.md#class-error>
[inspect]: #utilinspectobject-options
"""


def test_reference_definitions_go_and_their_uses_become_text() -> None:
    assert clean_markdown(NODE_STYLE) == (
        "# util\n\n## util.isArray(object)\n\n"
        "Internal alias for `Array.isArray()`. See the guide and `Error` and\n"
        "`util.inspect()`.\n"
    )


def test_references_without_definitions_and_footnotes_stay() -> None:
    page = "See [missing][] and [also][nope] and [^1] and [x] done.\n\n[^1]: https://footnote\n"
    assert clean_markdown(page) == page
    indented = "Text.\n\n    [code]: https://not.a.definition\n"
    assert clean_markdown(indented) == indented


def test_inline_links_and_images_become_their_text() -> None:
    page = (
        'Read [the docs](https://x.test/docs "Docs") or [a page](../a.md#top) '
        "or [wiki](https://en.wikipedia.org/wiki/Foo_(bar)).\n\n"
        "![Architecture diagram](img/arch.png) and [![logo](logo.png)](https://x.test) inline.\n"
    )
    assert clean_markdown(page) == (
        "Read the docs or a page or wiki.\n\nArchitecture diagram and logo inline.\n"
    )


def test_link_syntax_that_is_not_an_address_stays() -> None:
    # SciFact abstracts: the parenthesis is content (intracellular, knockout).
    text = "Rise in [Ca(2+)](i) of GHS-R [GHS-R](-/-) mice; see [LICENSE](LICENSE).\n"
    assert clean_markdown(text) == text


def test_badge_lines_are_dropped() -> None:
    page = """# Project

[![Build](https://ci.test/badge.svg)](https://ci.test) [![npm][npm-img]][npm-url]
<a href="https://x.test"><img src="https://x.test/b.svg" alt="coverage"></a>

A library.

[npm-img]: https://img.shields.io/npm/v/x.svg
[npm-url]: https://npmjs.com/package/x
"""
    assert clean_markdown(page) == "# Project\n\nA library.\n"


# ------------------------------------------------------------------ HTML


def test_inline_html_becomes_its_text() -> None:
    page = (
        'Press <kbd>Ctrl</kbd>+<kbd>C</kbd>, see <a href="x.html">the <b>docs</b></a>, '
        "x<sup>2</sup> and <code>--port</code>.<br>Next line.\n"
    )
    assert clean_markdown(page) == ("Press Ctrl+C, see the docs, x2 and --port.\nNext line.\n")


def test_details_block_becomes_paragraphs() -> None:
    page = """<details>
  <summary>Show the options</summary>

The **options** are listed here.

</details>
"""
    assert clean_markdown(page) == "Show the options\n\nThe **options** are listed here.\n"


def test_images_scripts_and_styles() -> None:
    page = (
        '<p align="center">\n  <img src="logo.png" alt="Acme logo" width="200"/>\n</p>\n\n'
        "<script>track('x')</script><style>p { color: red }</style>Text.\n"
    )
    assert clean_markdown(page) == "Acme logo\n\nText.\n"


def test_html_table_rows_and_breaks_inside_pipe_tables() -> None:
    page = "| name | notes |\n|---|---|\n| a | one<br>two <b>bold</b> |\n"
    assert clean_markdown(page) == "| name | notes |\n|---|---|\n| a | one two bold |\n"


def test_components_of_a_site_framework_leave_their_content() -> None:
    # As the Vue.js guide writes them for VitePress (vuejs/docs).
    page = (
        "# Events\n\n"
        '<VueSchoolLink href="https://vueschool.io/lessons/emits" title="Free Lesson"/>\n\n'
        'Emit an event.\n\n<SwitchComponent use-KeepAlive @change="log" />\n\n'
        '<ClientOnly>\n  <Teleport to="body">\n\nModal text.\n\n  </Teleport>\n</ClientOnly>\n\n'
        '## Props <Badge text="beta" />\n\n```vue\n<MyButton @click="go" />\n```\n'
        "<VueMasteryLogoLink></VueMasteryLogoLink>\n"
    )
    expected = (
        "# Events\n\nEmit an event.\n\nModal text.\n\n## Props\n\n"
        '```vue\n<MyButton @click="go" />\n```\n'
    )
    assert clean_markdown(page) == expected


def test_a_component_closed_after_a_code_block_is_a_tag() -> None:
    # TiDB's docs (pingcap/docs-cn) put code between a tab group's tags.
    page = (
        '<SimpleTab groupId="os">\n\n<div label="macOS">\n\n```bash\nbrew install mysql\n```\n\n'
        "</div>\n\n</SimpleTab>\n\nText with a Vec<Item> in it.\n"
    )
    expected = "```bash\nbrew install mysql\n```\n\nText with a Vec<Item> in it.\n"
    assert clean_markdown(page) == expected


def test_a_links_text_may_hold_brackets() -> None:
    # A changelog's line, as Vite's migration guide writes them.
    page = "- [[#14119] refactor!: merge types](https://github.com/vitejs/vite/pull/14119)\n"
    assert clean_markdown(page) == "- [#14119] refactor!: merge types\n"
    # A link inside a link's text is read first; the outer one keeps its rule.
    assert clean_markdown("[a [b](https://u.test) c](LICENSE)") == "[a b c](LICENSE)"
    assert clean_markdown("x [a] [b] y") == "x [a] [b] y"


@given(extra=st.integers(min_value=-3, max_value=3))
def test_a_bracketed_part_of_a_links_text_is_read_within_its_bound(extra: int) -> None:
    """80 characters inside a bracketed part of a link's text (markdown_links):
    within, the link reads as its text; one past, it stays as written."""
    inner = "x" * (80 + extra)
    page = f"[[{inner}] fix](https://e.test/1)"
    assert clean_markdown(page) == (f"[{inner}] fix" if extra <= 0 else page)


def test_a_link_to_the_sites_root_reads_as_its_text() -> None:
    page = "翻译版本：[简体中文](/)、[English](../)、[here](./)"
    assert clean_markdown(page) == "翻译版本：简体中文、English、here"


def test_a_self_closing_tag_after_a_word_is_a_tag() -> None:
    # The Vue.js guide's TypeScript badge after a heading's last word.
    page = '### Typing Functional Components<sup class="vt-badge ts" />\n\nText.'
    assert clean_markdown(page) == "### Typing Functional Components\n\nText."


def test_an_html_pages_text_that_reads_as_a_component_stays_text() -> None:
    # A page converted from HTML escapes it; the Markdown cleaning then keeps it.
    text = "Run <Tool /> then </Tool> and <Box>it</Box>."
    assert clean_markdown(escape_markup(text)) == escape_markup(text)
    assert "\\<Tool />" in escape_markup(text)


@pytest.mark.parametrize(
    "text",
    [
        "A `Vec<String>` or a Vec<String> outside code.\n",
        "A List<Item> of <Item>s, mailsplit <Maildir>, and <Mock name='m' id='1'>.\n",
        "Generic <T> and Option<Box<dyn Error>> and Array<Object> or Promise<object>.\n",
        "If a<b and b>c, then x -> y and <- z; chunkSize=800.\n",
        "An autolink <https://example.com> and <mailto:a@b.test>.\n",
        "Usage: tool <file> <output-dir>\n",
    ],
)
def test_text_that_only_looks_like_html_stays(text: str) -> None:
    assert clean_markdown(text) == text


def test_cjk_and_structure_survive() -> None:
    page = """# 安装指南

支持中文、日本語の文章、한국어 텍스트。

## 列表

- 第一项 `chunkSize=800`
- 第二项 <b>粗体</b>

| 键 | 值 |
|----|----|
| a  | 1  |

```python
print("你好")
```
"""
    expected = page.replace("<b>粗体</b>", "粗体")
    assert clean_markdown(page) == expected


# ------------------------------------------------------------------ front matter


def test_front_matter_is_cut_from_the_body() -> None:
    page = "---\ntitle: Setup\ntags: [a, b]\n---\n\n# Setup\n\nText.\n"
    assert clean_markdown(page) == "# Setup\n\nText.\n"
    malformed = "---\ntitle: [unclosed\n---\nText.\n"
    assert clean_markdown(malformed) == "Text.\n"
    assert read_front_matter(malformed)[0].title == ""


def test_a_leading_thematic_break_is_not_front_matter() -> None:
    page = "---\nSome prose, not YAML.\n---\n\nMore.\n"
    assert clean_markdown(page) == page


# ------------------------------------------------------------------ whole pages


def test_blank_lines_collapse_only_where_something_was_removed() -> None:
    untouched = "One.\n\n\n\nTwo.   \n"
    assert clean_markdown(untouched) == untouched
    touched = "One.\n\n<!-- x -->\n\n\n<!-- y -->\n\nTwo.\n\n```\na\n\n\n\nb\n```\n"
    assert clean_markdown(touched) == "One.\n\nTwo.\n\n```\na\n\n\n\nb\n```\n"


def test_normalize_body_cleans_markdown_only_when_asked() -> None:
    markdown = Document(doc_id="m", text="Hi <!-- x -->there\r\n")
    assert normalize_body(markdown) == "Hi there\n"
    assert normalize_body(markdown, clean=False) == "Hi <!-- x -->there\n"
    text = Document(doc_id="t", text="a <!-- b --> c", content_type=ContentType.TEXT)
    assert normalize_body(text) == "a <!-- b --> c"


def test_html_pages_that_mention_tags_keep_them() -> None:
    _, markdown = html_to_markdown(
        "<p>Use the &lt;details&gt; element, write &lt;!-- notes --&gt; and "
        "[text](https://x.test) as Markdown.</p>"
    )
    for kept in ("details", "notes", "text", "https://x.test"):
        assert kept in clean_markdown(markdown)


def _page_ending_in_definitions(count: int) -> str:
    sections = "\n\n".join(
        f"## util.fn{i}(value)\n\nCalls [`util.helper{i}()`][] on the value and returns it."
        for i in range(4)
    )
    definitions = "\n".join(
        f"[`util.helper{i % 4}()`]: util.md#utilhelper{i}value-options-and-more"
        for i in range(count)
    )
    return f"# util\n\n{sections}\n\n{definitions}\n"


def test_a_page_ending_in_definitions_gives_no_chunk_of_markup() -> None:
    doc = Document(doc_id="util.md", text=_page_ending_in_definitions(15))
    raw = document_chunks(Chunker(SMALL), doc, clean=False)
    # As written, the definitions fill chunks of their own under the last heading.
    assert any(c.text.startswith("[`util.helper") for c in raw)
    chunks = document_chunks(Chunker(SMALL), doc)
    assert chunks and all("]:" not in c.text and "[`" not in c.text for c in chunks)
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert "Calls `util.helper3()` on the value" in chunks[-1].text


# ------------------------------------------------------------------ chunk guard


def test_spans_without_letters_or_digits_are_not_indexed() -> None:
    body = "# Title\n\n" + "Some words here. " * 12 + "\n\n" + "- - - * * * ---\n\n" * 40
    chunker = Chunker(SMALL)
    spans = chunker.split(body)
    kept = indexable_spans(chunker, body)
    assert any(not any(ch.isalnum() for ch in s.text) for s in spans)
    assert kept and all(any(ch.isalnum() for ch in s.text) for s in kept)
    assert kept == [s for s in spans if s in kept]  # order kept, nothing invented


def test_a_section_of_symbols_beyond_ascii_is_indexed_and_a_table_rule_is_not() -> None:
    # Probe: a section of status emoji after 850 characters of prose was in no
    # chunk (kept were spans with a letter or digit only), and an emoji-only
    # page was refused as empty, though queries of symbols are accepted.
    status = "\n".join(["✅ 🚧 ❌ ➡️ 🚀"] * 60)
    body = "# Status\n\n" + "Words about the release. " * 34 + "\n\n" + status
    body += "\n\n" + "| --- | --- |\n\n" + "+ = ~ ` < > |\n" * 40
    chunker = Chunker(SMALL)
    kept = indexable_spans(chunker, body)
    assert any("🚧" in s.text and not any(ch.isalnum() for ch in s.text) for s in kept)
    assert sum(s.text.count("🚧") for s in kept) >= 60  # every line of them, once or more
    assert all(any(ch.isalnum() or ord(ch) > 127 for ch in s.text) for s in kept)
    assert indexable_spans(chunker, "∀ x ∈ S → x ≠ ∅; price: 5 €")
    assert not indexable_spans(chunker, "```\n```\n\n| --- |\n\n* * *")


def test_a_final_heading_keeps_its_words() -> None:
    # It has no content to travel with, so it joins the chunk before it.
    body = "# Guide\n\n" + "Words of the first part. " * 30 + "\n\n## Last\n"
    spans = indexable_spans(Chunker(SMALL), body)
    assert spans[-1].text.endswith("## Last") and "first part." in spans[-1].text


def _planner(tmp_path: Path, *, clean: bool = True) -> tuple[Planner, SqliteManifest]:
    manifest = SqliteManifest(tmp_path / "manifest.sqlite")
    return Planner(Chunker(SMALL), manifest, DocumentLimits(), clean_markdown=clean), manifest


def test_switching_cleaning_keeps_chunks_of_documents_without_markup(tmp_path: Path) -> None:
    on, manifest = _planner(tmp_path)
    off = Planner(Chunker(SMALL), manifest, DocumentLimits(), clean_markdown=False)
    plain = Document(
        doc_id="plain", text="# Plain\n\n" + "Nothing to clean here. " * 20, scope_id="site"
    )
    marked = Document(doc_id="marked", text=NODE_STYLE, scope_id="site")
    (plain_on, marked_on), (plain_off, marked_off) = (
        on.plan_upserts([plain, marked], deadline=unrequested_deadline()),
        off.plan_upserts([plain, marked], deadline=unrequested_deadline()),
    )
    assert plain_on.entry == plain_off.entry
    assert marked_on.entry and marked_off.entry
    assert marked_on.entry.content_hash != marked_off.entry.content_hash
    manifest.close()


def test_metadata_change_on_an_index_cut_before_the_guard_rechunks(tmp_path: Path) -> None:
    planner, manifest = _planner(tmp_path)
    body = "# Title\n\n" + "Some words here. " * 12 + "\n\n" + "- - - * * * ---\n\n" * 40
    doc = Document(doc_id="d", text=body, title="Old", scope_id="site")
    (added,) = planner.plan_upserts([doc], deadline=unrequested_deadline())
    assert added.state is DocState.ADDED and added.entry
    stale_id = "from-a-markup-only-span"
    old = added.entry
    manifest.put_many([
        ManifestEntry(old.doc_id, old.locale, old.scope_id, old.content_hash, old.metadata_hash,
                      (*old.chunk_ids, stale_id), (*old.chunk_hashes, "x"))
    ], deadline=unrequested_deadline())  # fmt: skip
    (plan,) = planner.plan_upserts([replace(doc, title="New")], deadline=unrequested_deadline())
    assert plan.state is DocState.CHANGED
    assert plan.to_delete == [stale_id]
    manifest.close()


# ------------------------------------------------------------------ settings


def test_cleaning_is_on_by_default_and_switchable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_CLEAN_MARKDOWN", raising=False)
    assert IndexerSettings().clean_markdown is True
    monkeypatch.setenv("RAG_CLEAN_MARKDOWN", "false")
    assert IndexerSettings().clean_markdown is False


# ------------------------------------------------------------------ properties

_FRAGMENTS = [
    "<!-- c -->", "<!--", "-->", "`", "``", "```", "~~~", "\n", "\n\n", "    ", "\t", " ",
    "[a]", "[a]: /u", "[b][a]", "[a][]", "![x](y.png)", "[t](https://u.test)", "[Ca](i)",
    "<b>", "</b>", "<br>", "<div>", "</div>", '<img alt="z" src="p">', "<script>s</script>",
    "Vec<String>", "a<b", "x -> y", "| c |", "---", "title: t", "中文", "\\", "#", "- ",
    "[![b](i.svg)](l.html)", "<details>", "<summary>", "<T>", "&amp;", "[^1]: f", "<",
    ">", "[", "]", "(", ")", "!", ":", "word", "Array<object>", "</object>", "<Demo />",
    '<Link to="x"/>', "<ClientOnly>", "</ClientOnly>", "List<Item>", "</Item>",
]  # fmt: skip
_pages = st.lists(
    st.one_of(
        st.sampled_from(_FRAGMENTS),
        st.text(alphabet=string.ascii_letters + "<>!-[]()`:/ \n", max_size=8),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(page=_pages)
def test_cleaning_is_idempotent_and_adds_no_characters(page: str) -> None:
    cleaned = clean_markdown(page)
    assert clean_markdown(cleaned) == cleaned
    assert set(cleaned) <= set(page) | {"\n", " "}
    assert len(cleaned) <= len(page)


@pytest.mark.parametrize(
    "nest",
    [
        lambda n: "<!-" * n + "<!---->" + "-->" * n,
        lambda n: "<" * n + "b>" + "b>" * n,
        lambda n: "[" * n + "[a](http://e.com)" + "](http://e.com)" * n,
    ],
    ids=["comments", "tags", "links"],
)
def test_markup_that_each_removal_makes_anew_costs_a_bounded_number_of_passes(
    nest: Callable[[int], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Probe: a pass a nesting level made a 24 KB body hold the Indexer for 9 s
    # (quadratic; 2 MB: hours), past the caller's deadline.
    passes: list[int] = []
    clean_once = markdown_text._clean_once

    def counted(text: str) -> str:
        passes.append(len(text))
        return clean_once(text)

    monkeypatch.setattr(markdown_text, "_clean_once", counted)
    body = "Intro.\n\n" + nest(5_000)
    cleaned = clean_markdown(body)
    assert len(passes) == MAX_PASSES  # stopped by the cap, not by the nesting
    assert set(cleaned) <= set(body) and len(cleaned) < len(body)
    # A shallow nest still reaches its fixpoint well within the cap.
    passes.clear()
    assert clean_markdown(nest(3)) == clean_markdown(clean_markdown(nest(3)))
    assert len(passes) < MAX_PASSES
