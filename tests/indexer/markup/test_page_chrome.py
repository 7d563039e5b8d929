"""Site navigation dropped from HTML pages, as real generators write it
(the structures are those of pages Debian ships: Texinfo's libffi and bc
manuals, valgrind's and shared-mime-info's DocBook)."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup, Tag
from bs4.element import PreformattedString
from hypothesis import example, given, settings
from hypothesis import strategies as st

from services.indexer.markup import page_chrome
from services.indexer.markup.html_markdown import html_to_markdown

pytestmark = pytest.mark.unit

TEXINFO_SECTION = """<body lang="en"><div class="section" id="Types">
<div class="header"><p>
Next: <a href="Multiple-ABIs.html" accesskey="n" rel="next">Multiple ABIs</a>,
Previous: <a href="Simple-Example.html" accesskey="p" rel="prev">Simple Example</a>,
Up: <a href="Using-libffi.html" accesskey="u" rel="up">Using libffi</a> &nbsp;
[<a href="Index.html" title="Index" rel="index">Index</a>]</p></div>
<hr><h3 class="section">2.3 Types</h3>
<ul class="section-toc">
<li><a href="Primitive-Types.html" accesskey="1">Primitive Types</a></li>
<li><a href="Structures.html" accesskey="2">Structures</a></li></ul>
</div></body>"""


def test_a_texinfo_pager_goes_and_its_menu_stays() -> None:
    """The "Next: … Previous: … Up: …" line goes; the section around it (it has
    a heading) and its menu (access keys 1-9) stay."""
    _, markdown = html_to_markdown(TEXINFO_SECTION)
    assert markdown == "### 2.3 Types\n\n- Primitive Types\n- Structures"


@pytest.mark.parametrize(
    ("header", "footer"),
    [
        (  # DocBook XSL (the Debian Reference)
            '<div class="navheader"><table summary="Navigation header"><tr>'
            '<td><a accesskey="p" href="pr01.html">Prev</a></td>'
            '<td><a accesskey="n" href="ch02.html">Next</a></td></tr></table></div>',
            '<div class="navfooter"><table><tr><td>Preface</td>'
            '<td><a href="index.html">Home</a></td></tr></table></div>',
        ),
        (  # DSSSL, in capitals (shared-mime-info); valgrind's own table class
            '<DIV CLASS="NAVHEADER"><TABLE SUMMARY="Header navigation table"><TR>'
            '<TH COLSPAN="3">Shared MIME-info Database</TH></TR><TR>'
            '<TD><A HREF="x34.html" ACCESSKEY="P">Prev</A></TD></TR></TABLE></DIV>',
            '<div><table class="nav" summary="Navigation footer"><tr>'
            '<td><a accesskey="p" href="FAQ.html">&lt;&lt; Valgrind FAQ</a></td>'
            '<td><a accesskey="u" href="FAQ.html">Up</a></td></tr></table></div>',
        ),
    ],
)
def test_docbook_tables_go(header: str, footer: str) -> None:
    page = f'<body>{header}<div class="chapter"><h1>1. Tutorial</h1><p>Body.</p></div>{footer}'
    _, markdown = html_to_markdown(page + "</body>")
    assert markdown == "# 1. Tutorial\n\nBody."


def test_a_sidebar_without_links_into_the_page_goes() -> None:
    page = (
        '<body><div role="main"><h1>atexit</h1><p>Exit handlers.</p></div>'
        '<div role="navigation"><h4>Next topic</h4><p><a href="b.html">b</a></p></div></body>'
    )
    _, markdown = html_to_markdown(page)
    assert markdown == "# atexit\n\nExit handlers."


def test_a_pager_with_a_link_into_the_page_stays() -> None:
    page = (
        '<body><div class="header"><p>Previous: <a href="a.html" rel="prev">A</a> '
        '[<a href="#Index">Index</a>]</p></div><h2>Index</h2><p>Entries.</p></body>'
    )
    _, markdown = html_to_markdown(page)
    assert markdown.startswith("Previous: A [Index]")


def test_a_paragraph_longer_than_a_pager_keeps_its_text() -> None:
    sentence = "The next chapter explains the closure API in detail, with examples. " * 5
    page = f'<body><p>{sentence}<a href="closures.html" rel="next">Closures</a></p></body>'
    _, markdown = html_to_markdown(page)
    assert "Closures" in markdown and "closure API" in markdown


def test_a_page_of_thousands_of_pagers_loses_each_and_keeps_its_text() -> None:
    """What each block holds is summed once per page: asking every block about
    its own subtree took minutes on 20,000 pager links in one `<div>`."""
    pagers = '<div><a accesskey="n" href="next.html">Next</a></div>' * 3000
    nested = '<div><h2>Part</h2><a rel="prev" href="p.html">Prev</a><p>Kept.</p>' * 300
    nested += "</div>" * 300  # each block has a heading: none is a pager
    _, markdown = html_to_markdown(f"<body><div>{pagers}</div><h1>Page</h1>{nested}</body>")
    assert "Next" not in markdown
    assert markdown.count("Kept.") == 300


# ---------------------------------------------------------------- properties

_LINKS = [
    '<a href="other.html">o</a>',
    '<a href="#here">h</a>',
    '<a rel="next" href="n.html">n</a>',
    '<a accesskey="P" href="p.html">p</a>',
    '<a accesskey="3" href="menu.html">m</a>',
]
_MARKS = ["", ' role="navigation"', ' class="navheader"', ' class="x NavFooter"']


def _texts(length: int) -> str:
    return "w" * length


_leaves = st.one_of(
    st.sampled_from(_LINKS),
    st.integers(0, 320).map(_texts),  # around PAGER_MAX_CHARS
    st.just("<h2>T</h2>"),
)
_blocks = st.recursive(
    _leaves,
    lambda inner: st.tuples(
        st.sampled_from(["div", "p", "table", "span", "section"]),
        st.sampled_from(_MARKS),
        st.lists(inner, max_size=4),
    ).map(lambda t: f"<{t[0]}{t[1]}>{''.join(t[2])}</{t[0]}>"),
    max_leaves=12,
)


def _naive_navigation(soup: BeautifulSoup) -> None:
    """The rule asked of each block about its own subtree (quadratic, but
    plain): what `drop_site_navigation` must agree with."""

    def holds(tag: Tag) -> dict[str, bool | int]:
        links = [tag] if tag.name == "a" else []
        links += tag.find_all("a")
        hrefs = [str(a.get("href") or "") for a in links]
        return {
            "chars": sum(
                len(s) for s in tag.find_all(string=True) if not isinstance(s, PreformattedString)
            ),
            "link": any(hrefs),
            "in_page": any(h.strip().startswith("#") for h in hrefs),
            "out": any(h and not h.strip().startswith("#") for h in hrefs),
            "pager": any(page_chrome._is_pager_link(a) for a in links),
            "heading": tag.name in ("h1", "h2", "h3", "h4", "h5", "h6")
            or tag.find(("h1", "h2", "h3", "h4", "h5", "h6")) is not None,
        }

    def walk(tag: Tag, in_navigation: bool) -> None:
        for child in list(tag.children):
            if not isinstance(child, Tag):
                continue
            held = holds(child)
            marked = page_chrome._marked_navigation(child)
            pager = (
                child.name in ("div", "table", "p")
                and bool(held["pager"])
                and int(held["chars"]) <= page_chrome.PAGER_MAX_CHARS
                and not held["heading"]
            )
            goes = (pager and not held["out"]) or (
                not held["in_page"]
                and (
                    marked
                    or (in_navigation and child.name == "div" and bool(held["link"]))
                    or (
                        child.name in ("div", "table", "p")
                        and bool(held["pager"])
                        and int(held["chars"]) <= page_chrome.PAGER_MAX_CHARS
                        and not held["heading"]
                    )
                )
            )
            if goes:
                child.extract()
            else:
                walk(child, in_navigation or marked)

    walk(soup, False)


@settings(max_examples=200, deadline=None)
@given(st.lists(_blocks, min_size=1, max_size=4))
def test_one_pass_agrees_with_asking_each_block(blocks: list[str]) -> None:
    html = "<body>" + "".join(blocks) + "</body>"
    fast, naive = BeautifulSoup(html, "html.parser"), BeautifulSoup(html, "html.parser")
    page_chrome.drop_site_navigation(fast)
    _naive_navigation(naive)
    assert str(fast) == str(naive)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2 * page_chrome.PAGER_MAX_CHARS), st.sampled_from(["div", "p", "table"]))
@example(page_chrome.PAGER_MAX_CHARS - len("Next"), "div")  # the limit itself
@example(page_chrome.PAGER_MAX_CHARS - len("Next") + 1, "p")  # one past it
def test_a_pager_is_at_most_the_limit_long(length: int, block: str) -> None:
    text = "w" * length
    html = f'<body><{block}><a rel="next" href="n.html">Next</a>{text}</{block}><p>kept</p></body>'
    soup = BeautifulSoup(html, "html.parser")
    page_chrome.drop_site_navigation(soup)
    dropped = "Next" not in soup.get_text()
    assert dropped == (length + len("Next") <= page_chrome.PAGER_MAX_CHARS)
    assert "kept" in soup.get_text()


@pytest.mark.parametrize(
    "link",
    [
        '<a href="#apicontent" class="skip-to-content">Skip to content</a>',  # Node.js
        '<a class="skip-link" href="#main">Skip to main content</a>',
        '<a href="#nav">Jump to navigation</a>',
        '<a href="#content"><span>Skip</span> <span>navigation links</span></a>',
    ],
)
def test_a_skip_link_goes(link: str) -> None:
    page = f"<html><body>{link}<main id=main><h1>Util</h1><p>Body.</p></main></body></html>"
    assert html_to_markdown(page)[1] == "# Util\n\nBody."


@pytest.mark.parametrize(
    "link",
    [
        '<a href="#content">Skip to content and examples below</a>',  # says more
        '<a href="https://x.test/">Skip to content</a>',  # leads elsewhere
        '<a href="#options">Skip the options</a>',
    ],
)
def test_a_link_that_says_more_or_leads_elsewhere_stays(link: str) -> None:
    page = f"<html><body><p>{link}</p><h1>Util</h1><p>Body.</p></body></html>"
    assert "Skip" in html_to_markdown(page)[1]


MANDOC_BODY = (
    '<div class="manual-text"><section class="Sh"><h1 class="Sh" id="NAME">NAME</h1>'
    "<p>cp - copy files and directories</p></section></div>"
)


@pytest.mark.parametrize(
    ("header", "footer"),
    [
        (  # mandoc 1.14.6 (Debian 12), as `mandoc -Thtml` writes it
            '<table class="head"><tr><td class="head-ltitle">CP(1)</td>'
            '<td class="head-vol">User Commands</td><td class="head-rtitle">CP(1)</td>'
            "</tr></table>",
            '<table class="foot"><tr><td class="foot-date">September 2022</td>'
            '<td class="foot-os">GNU coreutils 9.1</td></tr></table>',
        ),
        (  # later mandoc: blocks with the ARIA running-header roles
            '<div class="head" role="doc-pageheader" aria-label="Manual header line">'
            '<span class="head-ltitle">CP(1)</span> <span class="head-vol">User Commands'
            '</span> <span class="head-rtitle">CP(1)</span></div>',
            '<div class="foot" role="doc-pagefooter" aria-label="Manual footer line">'
            '<span class="foot-left"></span><span class="foot-date">September 2022</span>'
            ' <span class="foot-os">GNU coreutils 9.1</span></div>',
        ),
    ],
)
def test_a_manual_pages_running_header_and_footer_go(header: str, footer: str) -> None:
    """The name, volume, date and package line of every manual page opened
    its first chunk and closed its last (a bilingual man-page site)."""
    title, markdown = html_to_markdown(
        f"<html><head><title>CP(1)</title></head><body>{header}{MANDOC_BODY}{footer}</body></html>"
    )
    assert title == "CP(1)"
    assert markdown == "# NAME\n\ncp - copy files and directories"


@pytest.mark.parametrize(
    "block",
    [
        '<div class="head"><h1>Rate limits</h1><p>How many requests a key may send.</p></div>',
        '<table class="foot"><tr><td>60 requests</td><td>per minute</td></tr></table>',
    ],
)
def test_a_block_merely_classed_head_or_foot_stays(block: str) -> None:
    """`head` and `foot` are common class names: without mandoc's cells (or a
    running-header role) such a block is content."""
    _, markdown = html_to_markdown(f"<body>{block}</body>")
    assert "Rate limits" in markdown or "60 requests" in markdown


def test_a_one_page_manuals_pagers_go_though_they_lead_into_the_page() -> None:
    """`makeinfo --no-split` (bash's reference manual): each section's pager
    links to `#...` anchors of the same page; it goes all the same, and the
    menu (access keys 1-9) stays."""
    page = (
        '<body><div class="chapter-level-extent" id="Introduction">'
        '<div class="nav-panel"><p>Next: <a href="#Definitions" accesskey="n" rel="next">'
        'Definitions</a>, Up: <a href="#Top" accesskey="u" rel="up">Bash Features</a> &nbsp; '
        '[<a href="#SEC_Contents" title="Table of contents" rel="contents">Contents</a>]</p>'
        '</div><h2 class="chapter">1 Introduction</h2><p>Bash is the shell.</p>'
        '<ul class="mini-toc"><li><a href="#What-is-Bash_003f" accesskey="1">What is Bash?</a>'
        "</li></ul></div></body>"
    )
    _, markdown = html_to_markdown(page)
    assert markdown == "## 1 Introduction\n\nBash is the shell.\n\n- What is Bash?"


PAGE_BODY = (
    '<div class="body" role="main"><h1>Rate limits</h1><p>Send 60 requests a minute.</p></div>'
)


@pytest.mark.parametrize(
    "chrome",
    [
        # Sphinx's basic theme (Pallets' sites): footer and "Quick search" box.
        '<div class="footer" role="contentinfo">&#169; Copyright 2025 Pallets. Created using '
        '<a href="https://www.sphinx-doc.org/">Sphinx</a> 5.3.0.</div>',
        '<div id="searchbox" style="display: none" role="search"><h3 id="searchlabel">Quick search'
        '</h3><div class="searchformwrapper"></div></div>',
        # The Python documentation's footer: a class, no role.
        '<div class="footer">&copy; Copyright 2001-2026, Python Software Foundation. Please '
        '<a href="/psf/donations/">donate</a>.</div>',
        # asciidoc (git's manual pages): an id.
        '<div id="footer"><div id="footer-text">Last updated 2024-05-31 00:35:55 UTC</div></div>',
        '<div role="banner"><p>Example Corp documentation</p></div>',
        # SQLite's banner and menus, marked for its own search to skip.
        '<div class=nosearch><div class="tagline">Small. Fast. Reliable.<br>Choose any three.'
        '</div><div class="menu mainmenu"><ul><li><a href="index.html">Home</a>'
        '<li><a href="about.html">About</a></ul></div></div>',
        '<div data-pagefind-ignore="all"><p>Related posts: caching, retries</p></div>',
        "<div data-search-exclude><p>Edit this page on GitHub</p></div>",
        "<noindex><p>Advertisement</p></noindex>",
    ],
)
def test_a_banner_footer_or_block_marked_not_for_search_goes(chrome: str) -> None:
    """Written without `<header>`/`<footer>`, the same chrome closed every
    page's last chunk (the Python documentation's copyright and donation
    lines on 530 pages) or opened its first (SQLite's banner)."""
    for page in (f"<body>{chrome}{PAGE_BODY}</body>", f"<body>{PAGE_BODY}{chrome}</body>"):
        _, markdown = html_to_markdown(page)
        assert markdown == "# Rate limits\n\nSend 60 requests a minute."


@pytest.mark.parametrize(
    "body",
    [
        '<div role="main"><h1>Limits</h1><div class="footer"><p>Footnote: per key.</p></div></div>',
        '<article><h1>Limits</h1><div role="contentinfo"><p>Footnote: per key.</p></div></article>',
        '<h1>Limits</h1><section><div id="footer"><p>Footnote: per key.</p></div></section>',
    ],
)
def test_a_footer_inside_the_content_stays(body: str) -> None:
    """A block named footer inside the main content, an article or a section
    is that part's own (a card's or a table's footer), as `<header>` is."""
    _, markdown = html_to_markdown(f"<body>{body}</body>")
    assert markdown == "# Limits\n\nFootnote: per key."


def test_a_block_marked_not_for_search_keeps_its_headings() -> None:
    """SQLite marks its page titles `nosearch` (its search takes the title
    from `<title>`); here headings are the chunks' heading paths."""
    page = (
        '<body><div class=nosearch><a href="intro.html"><h2>SQLite C Interface</h2></a>'
        "<h2>Set A Busy Timeout</h2></div><p>This routine sets a busy handler.</p></body>"
    )
    _, markdown = html_to_markdown(page)
    assert markdown.endswith("## Set A Busy Timeout\n\nThis routine sets a busy handler.")


def test_a_tooltips_text_goes() -> None:
    """rustdoc puts a hover box after 85 method signatures of Vec's page:
    "Notable traits for Vec<u8, A> impl Write for …" was in every heading."""
    page = (
        '<h4 class="code-header">pub fn new() -&gt; Vec&lt;T&gt;<span class="notable-traits">'
        '<span class="notable-traits-tooltip">ⓘ<span class="notable-traits-tooltiptext">'
        '<span class="docblock"><h3>Notable traits for Vec&lt;u8&gt;</h3>impl Write</span>'
        "</span></span></span></h4><p>Constructs a new, empty vector.</p>"
    )
    _, markdown = html_to_markdown(page)
    assert markdown == "#### pub fn new() -> Vec<T>ⓘ\n\nConstructs a new, empty vector."


@pytest.mark.parametrize(
    "control",
    [
        '<a class="test-arrow" target="_blank" href="https://play.rust-lang.org/?code=x">Run</a>',
        '<a class="srclink" href="../src/vec.rs.html#400">source</a>',
        '<a id="toggle-all-docs" href="javascript:void(0)" title="collapse all docs">[−]</a>',
        '<a href="JavaScript:toggle_search()">Search</a>',
        '<a href="_modules/werkzeug/serving.html#run_simple"><span class="viewcode-link">'
        "[source]</span></a>",
    ],
)
def test_the_pages_controls_go(control: str) -> None:
    """rustdoc's "Run" under every example (217 on Vec's page) and "source"
    beside every item (336) were words of the page's text."""
    _, markdown = html_to_markdown(f"<p>Constructs a new, empty vector.{control}</p>")
    assert markdown == "Constructs a new, empty vector."


def test_the_pages_controls_are_told_by_class_or_script_not_by_words() -> None:
    page = '<p>See the <a href="../src/vec.rs.html">source</a> and <a href="#run">Run</a>.</p>'
    assert html_to_markdown(page)[1] == "See the source and Run."
