"""Unit tests for HTML → Markdown: pages nested deeper than the renderer
recurses, and page chrome that element names do not show."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.models import ContentType, Document
from services.indexer.chunking import Chunker, ChunkingParams
from services.indexer.markup.html_markdown import (
    MAX_RENDERED_DEPTH,
    html_to_markdown,
    without_comments,
)
from services.indexer.planning import DocState, Planner
from services.indexer.validation import DocumentLimits
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest

pytestmark = pytest.mark.unit

# Valid HTML (`</p>` may be left out), which the standard-library parser nests
# 600 levels deep: it once stopped the renderer with a RecursionError, an
# Upsert with INTERNAL for the whole batch and `ingest` of a folder with a
# traceback (tests/sources/test_loaders.py).
UNCLOSED_PARAGRAPHS = "<html><body>" + "".join(f"<p>para{i} " for i in range(600))


def test_unclosed_paragraphs_600_deep_keep_every_word() -> None:
    _, markdown = html_to_markdown(UNCLOSED_PARAGRAPHS)
    assert all(f"para{i}" in markdown for i in range(600))


def test_elements_below_the_depth_become_text_and_dropped_ones_go() -> None:
    deep = "<div>" * 5000 + "<script>evil()</script><b>deep</b> words" + "<span>" * 3000 + "end"
    _, markdown = html_to_markdown("<h1>Title</h1>" + deep)
    assert markdown.startswith("# Title\n\n")
    assert "deep words" in markdown and markdown.endswith("end")
    assert "evil" not in markdown


def test_structure_within_the_depth_is_rendered_as_before() -> None:
    nested = "<div>" * (MAX_RENDERED_DEPTH - 5) + "<h2>Deep</h2><ul><li>one</li></ul>"
    assert html_to_markdown(nested)[1] == "## Deep\n\n- one"


def test_a_list_nested_past_the_depth_keeps_every_item() -> None:
    """Items below MAX_RENDERED_DEPTH become text; they stay list items, with
    their words, instead of vanishing with the <li> that held them."""
    levels = MAX_RENDERED_DEPTH // 2 + 20
    html = "<ul>" + "".join(f"<li>item{i}<ul>" for i in range(levels)) + "<li>deepest</li>"
    text = html_to_markdown(html + "</ul></li>" * levels + "</ul><!-- note -->")[1]
    assert all(f"item{i}" in text for i in range(levels)) and "deepest" in text
    assert "note" not in text  # a comment is no item


def test_a_deep_html_document_is_planned_not_refused(tmp_path: Path) -> None:
    manifest = SqliteManifest(tmp_path / "manifest.sqlite")
    planner = Planner(Chunker(ChunkingParams()), manifest, DocumentLimits())
    doc = Document(
        doc_id="deep",
        text=UNCLOSED_PARAGRAPHS,
        scope_id="site",
        content_type=ContentType.HTML,
    )
    (plan,) = planner.plan_upserts([doc], deadline=unrequested_deadline())
    manifest.close()
    assert plan.state is DocState.ADDED


# ---------------------------------------------------------------- page chrome

SPHINX_PAGE = """<html><head><title>difflib — Python docs</title></head><body>
<div class="related" role="navigation"><h3>Navigation</h3><ul>
<li><a href="../genindex.html">index</a></li><li><a href="filecmp.html">previous</a> |</li>
<li><a href="../index.html">Python</a> &#187;</li></ul></div>
<div class="body" role="main"><section id="difflib">
<h1><code>difflib</code> — Helpers for computing deltas<a class="headerlink" href="#difflib">¶</a>
</h1>
<dl><dt id="difflib.Differ">class difflib.Differ<a class="headerlink" href="#difflib.Differ">¶</a>
</dt>
<dd><p>Compares sequences of lines of text. See <a href="#difflib.ndiff">ndiff</a>.</p></dd></dl>
</section></div>
<div class="sphinxsidebar" role="navigation">
<h3><a href="../contents.html">Table of Contents</a></h3>
<ul><li><a href="#">`difflib` — Helpers</a>
<ul><li><a href="#differ-objects">Differ Objects</a></li></ul></li></ul>
<div><h4>Previous topic</h4><p><a href="filecmp.html">filecmp</a></p></div>
<div id="sidebarbutton"><span>Collapse</span></div></div>
<div role="search"><form><input name="q"></form><p>Quick search</p></div>
</body></html>"""


def test_sphinx_pages_keep_their_sidebar_and_permalinks() -> None:
    """Both were measured: leaving either out lost third-party questions."""
    _, markdown = html_to_markdown(SPHINX_PAGE)
    assert "# `difflib` — Helpers for computing deltas¶\n" in markdown
    assert "See ndiff." in markdown
    assert "Table of Contents" in markdown


def test_navigation_that_only_names_other_pages_is_dropped() -> None:
    """Sphinx's "related" bar: the page's first chunk used to start with it and
    be cited under the heading "Navigation"."""
    _, markdown = html_to_markdown(SPHINX_PAGE)
    assert markdown.startswith("# `difflib` — Helpers for computing deltas¶")
    assert "Navigation" not in markdown
    assert "Differ Objects" in markdown  # the sidebar links into this page
    assert "Previous topic" not in markdown  # its part that leads elsewhere only
    assert "Collapse" in markdown  # a part without links is not navigation


def test_a_sections_header_is_kept_and_the_sites_is_not() -> None:
    page = (
        "<body><header><p>Site banner</p></header>"
        '<article><header><h1>Intro<a class="hash-link" href="#intro">\u200b</a></h1></header>'
        "<p>Body text.</p><footer>Edit this page</footer></article></body>"
    )
    _, markdown = html_to_markdown(page)
    assert markdown == "# Intro\u200b\n\nBody text."


@pytest.mark.parametrize(
    ("html", "text"),
    [
        # Never closed: a browser shows nothing after it (probe: a draft note
        # hidden this way was indexed and quoted in evidence).
        ("<p>visible</p><!-- secret draft note, never closed <p>more</p>", "visible"),
        ("<p>a</p><!--> <p>b</p>", "a\n\nb"),  # closed at once
        ("<p>a</p><!---> <p>b</p>", "a\n\nb"),
        ("<p>a</p><!-- x --!> <p>b</p>", "a\n\nb"),  # another way to close
        ("<p>a</p><!--x-->y<!--z-->w", "a\n\nyw"),
    ],
)
def test_comments_are_read_as_a_browser_reads_them(html: str, text: str) -> None:
    assert html_to_markdown(html)[1] == text


def test_many_comments_are_removed_in_one_pass() -> None:
    page = "<p>kept</p><!-- note -->" * 50_000
    assert without_comments(page) == "<p>kept</p>" * 50_000


_COMMENT_PIECES = ["<!--", "-->", "--!>", "<!-->", "<!--->", "<", "!", "-", ">", "a", " ", "\n"]


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from(_COMMENT_PIECES), max_size=60))
def test_removing_comments_only_deletes_and_ends_in_one_pass(pieces: list[str]) -> None:
    # Awkward inputs: openers without closers, closers without openers, the
    # abrupt forms, a comment at the very start or end of the text.
    html = "".join(pieces)
    kept = without_comments(html)
    assert len(kept) <= len(html)
    rest = iter(html)
    assert all(char in rest for char in kept)  # what is left is the input, in order
    if "<!--" not in html:
        assert kept == html


def test_a_paragraph_left_open_ends_at_the_next_block() -> None:
    """man2html's and sqlite.org's pages leave `</p>` out: the headings, code
    and lists after it stay structure (they were one glued paragraph:
    `intro textUsageRun it:make make installonetwo...`)."""
    page = (
        "<h1>T</h1><p>intro text<h2>Usage</h2><p>Run it:<pre>make\nmake install</pre>"
        "<ul><li>one</li><li>two</li></ul><h2>Options</h2><p>none"
    )
    assert html_to_markdown(page)[1] == (
        "# T\n\nintro text\n\n## Usage\n\nRun it:\n\n```\nmake\nmake install\n```"
        "\n\n- one\n- two\n\n## Options\n\nnone"
    )


def test_a_list_item_keeps_its_code_and_paragraphs_apart() -> None:
    """An item's paragraphs join its line with a space; its code block follows
    the line, fenced; items left open are items of their own (they were
    `- Install it:pip install foo foo --initSecond para.` and `- abpara in bc`)."""
    page = (
        "<ol><li><p>Install it:</p><pre>pip install foo\nfoo --init</pre><p>Second para.</p>"
        "</li><li><p>Run it.</p></li></ol><ul><li>a<li>b<p>para in b</p><li>c</ul>"
    )
    assert html_to_markdown(page)[1] == (
        "- Install it:\n\n```\npip install foo\nfoo --init\n```\n\nSecond para.\n\n- Run it."
        "\n\n- a\n- b para in b\n- c"
    )


def test_an_item_of_one_paragraph_stays_one_line() -> None:
    """DocBook wraps every item's text in `<p>`; Sphinx a nested list too."""
    page = (
        '<ul><li class="listitem"><p>First <code>x</code> item</p></li>'
        "<li><p>Two</p><ul><li><p>nested</p></li></ul></li></ul>"
    )
    assert html_to_markdown(page)[1] == "- First `x` item\n- Two\n  - nested"


def test_definitions_left_open_stay_apart() -> None:
    """Texinfo's and DocBook's `<dl>`: each term and each definition a
    paragraph, a definition's own paragraphs and code joined by spaces (they
    were all one: `aliasWithout arguments, printsthe list.alias ll='ls -l'bgResumes`)."""
    page = (
        "<dl><dt>alias<dd>Without arguments, prints<p>the list.</p><pre>alias ll='ls -l'</pre>"
        "<dt>bg<dd>Resumes</dl>"
    )
    assert html_to_markdown(page)[1] == (
        "alias\n\nWithout arguments, prints the list. alias ll='ls -l'\n\nbg\n\nResumes"
    )


def test_a_definition_holding_a_list_keeps_its_parts_as_blocks() -> None:
    """bash's `shopt` entry (a `<dd>` holding the list of options) was one
    paragraph of 12,666 characters; a list, a table or nested definitions
    keep their structure, and the definition's paragraphs are blocks too."""
    page = (
        "<dl><dt>shopt<dd><p>Toggle options.</p><dl><dt>autocd<dd>A name is run as cd.</dl>"
        "<ul><li>one<li>two</ul><dt>bg<dd>Resumes</dl>"
    )
    assert html_to_markdown(page)[1] == (
        "shopt\n\nToggle options.\n\nautocd\n\nA name is run as cd.\n\n- one\n- two"
        "\n\nbg\n\nResumes"
    )


def test_doxygen_code_written_one_div_a_line_is_a_code_block() -> None:
    """Doxygen writes code fragments and source listings as a `div` per line,
    led by its number, with hidden hover tooltips between: a header file was
    one paragraph per numbered line, each name followed by its tooltip."""
    page = (
        '<p>Examples:</p><div class="fragment"><div class="line"><a name="l00001"></a>'
        '<span class="lineno">    1</span>&#160;<a class="code" href="v.html">Json::Value</a> '
        'null_value; <span class="comment">// null</span></div>'
        '<div class="ttc" id="a1"><div class="ttname">Json::Value</div>'
        '<div class="ttdef">Definition: value.h:193</div></div>'
        '<div class="line"><span class="lineno">    2</span>&#160; </div>'
        '<div class="line"><span class="lineno">    3</span>&#160;  return 10;</div></div>'
    )
    assert html_to_markdown(page)[1] == (
        "Examples:\n\n```\nJson::Value null_value; // null\n\n  return 10;\n```"
    )
    # Doxygen 1.9 links a fragment's line numbers to the source listing: still numbers.
    linked = (
        '<div class="fragment"><div class="line"><a id="l00193" name="l00193"></a>'
        '<span class="lineno"><a class="line" href="value_8h_source.html#l00193">  193</a></span>'
        '<span class="keyword">class </span>Value {</div></div>'
    )
    assert html_to_markdown(linked)[1] == "```\nclass Value {\n```"
    # A block merely classed `fragment`, without its lines, is a block as before.
    assert html_to_markdown('<div class="fragment"><p>One.</p><p>Two.</p></div>')[1] == (
        "One.\n\nTwo."
    )


def test_a_link_or_summary_around_blocks_keeps_its_headings() -> None:
    """Haddock writes each section title as `<a id="g:1"><h1>…</h1></a>` and
    rustdoc each method's heading inside `<summary>`: rendered inline, the
    headings were lost and glued (`Building listsScans`, `sourcepub fn new()`;
    the "source" link itself goes, a control of the page)."""
    page = (
        '<a href="#g:1" id="g:1"><h1>Building lists</h1></a><p>Scan a list.</p>'
        '<a href="#g:2" id="g:2"><h1>Scans</h1></a>'
        '<details><summary><section id="method.new"><span class="rightside">'
        '<a class="srclink" href="../src/vec.rs.html#420">source</a></span>'
        '<h4 class="code-header">pub const fn new() -&gt; Vec&lt;T&gt;</h4></section></summary>'
        "<p>Constructs a new, empty <code>Vec&lt;T&gt;</code>.</p></details>"
    )
    assert html_to_markdown(page)[1] == (
        "# Building lists\n\nScan a list.\n\n# Scans\n\n"
        "#### pub const fn new() -> Vec<T>\n\nConstructs a new, empty `Vec<T>`."
    )


def test_a_table_that_lays_out_code_or_headings_is_read_as_its_blocks() -> None:
    """gtk-doc puts each code listing in a table beside a column of line
    numbers: the listing was one row, each `//` comment then running over the
    code after it. The numbers go; the code is a code block."""
    page = (
        '<table class="listing_frame"><tbody><tr><td class="listing_lines"><pre>1\n2</pre></td>'
        '<td class="listing_code"><pre class="programlisting">// save the state\n'
        "gboolean was_floating = TRUE;</pre></td></tr></tbody></table>"
        '<table><tr><td><h2><span class="refentrytitle">Hash Tables</span></h2>'
        "<p>Hash Tables — associations between keys and values</p></td></tr></table>"
    )
    assert html_to_markdown(page)[1] == (
        "```\n// save the state\ngboolean was_floating = TRUE;\n```\n\n"
        "## Hash Tables\n\nHash Tables — associations between keys and values"
    )


def test_a_table_of_data_with_paragraphs_in_its_cells_stays_a_table() -> None:
    """DocBook writes `<td><p>…</p></td>`: a table of data, as before."""
    page = (
        "<table><tr><th><p>Limit</p></th><th><p>Value</p></th></tr>"
        "<tr><td><p>keys</p></td><td><p>60</p></td></tr></table>"
    )
    assert html_to_markdown(page)[1] == "| Limit | Value |\n| --- | --- |\n| keys | 60 |"


def test_line_numbers_go_and_a_block_of_numbers_stays() -> None:
    """rustdoc's source pages open with a `pre` of 3,276 line numbers; a
    program's output that is numbers (no class speaking of lines) stays."""
    numbered = (
        '<pre class="line-numbers"><span>1</span>\n<span>2</span></pre><pre>fn main() {}</pre>'
    )
    assert html_to_markdown(numbered)[1] == "```\nfn main() {}\n```"
    assert html_to_markdown("<pre>1\n2\n3</pre>")[1] == "```\n1\n2\n3\n```"


def test_a_nul_character_in_a_page_is_dropped_as_a_browser_drops_it() -> None:
    """javadoc's CharUtils page holds one raw NUL (`'\\0'` written literally):
    the Indexer refuses text with NUL characters, and the whole page was lost."""
    page = "<h1>CharUtils</h1><p><code>\x00</code> null control character, abbreviated NUL.</p>"
    assert html_to_markdown(page)[1] == "# CharUtils\n\nnull control character, abbreviated NUL."


def test_text_outside_a_tables_cells_comes_before_the_rows() -> None:
    """A caption, and text a page left between rows or cells (a browser moves
    it before the table), were lost with the table's rows."""
    page = (
        "<table><caption>Limits</caption>loose<tr>in row<td>60</td><td>per minute</td></tr></table>"
    )
    assert html_to_markdown(page)[1] == "Limits\n\nloose\n\nin row\n\n| 60 | per minute |"


def test_a_list_written_straight_into_a_list_is_nested_not_lost() -> None:
    """`<ul><li>a</li><ul><li>b</li></ul></ul>` (hand-written pages) lost the
    inner list, and text outside any item was lost too."""
    page = "<ul><li>a</li><ul><li>b</li></ul><p>note</p><li>c</li></ul>"
    assert html_to_markdown(page)[1] == "- a\n  - b\n- note\n- c"
