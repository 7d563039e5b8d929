"""What documentation-site generators add to Markdown, reduced to what a reader sees (unit)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.models import ContentType, Document
from services.indexer.chunking import Chunker
from services.indexer.markup.markdown_text import clean_markdown
from services.indexer.markup.site_syntax import (
    MAX_ATTRIBUTE_CHARS,
    MAX_SHORTCODE_CHARS,
    reduce_site_syntax,
)
from services.indexer.planning import document_chunks

pytestmark = pytest.mark.unit

# A VitePress page of the Vue.js guide's Chinese translation, as written.
VITEPRESS_PAGE = """# 计算属性 {#computed-properties}

## 基础示例 {#basic-example}

模板中的表达式虽然方便，但也只能用来做简单的操作。

::: tip 提示
计算属性值会基于其响应式依赖被缓存。
:::

::: warning
不要在 getter 中做异步请求。
:::

```vue-html
<span>{{ author.books.length > 0 ? 'Yes' : 'No' }}</span>
```
"""

# A page of the Kubernetes site's Chinese localisation, as written.
HUGO_PAGE = """## 使用 Pod   {#working-with-pods}

**Pod** 是一组（一个或多个）{{< glossary_tooltip text="容器" term_id="container" >}}。

{{< note >}}
重启 Pod 中的容器不应与重启 Pod 混淆。
{{< /note >}}

{{% code_sample file="pods/simple-pod.yaml" %}}
"""


def test_vitepress_anchors_and_containers_go_titles_and_code_stay() -> None:
    cleaned = clean_markdown(VITEPRESS_PAGE)
    assert cleaned.startswith("# 计算属性\n\n## 基础示例\n")
    assert "提示\n计算属性值会基于其响应式依赖被缓存。" in cleaned
    assert ":::" not in cleaned and "warning" not in cleaned and "{#" not in cleaned
    assert "<span>{{ author.books.length > 0 ? 'Yes' : 'No' }}</span>" in cleaned


def test_hugo_shortcodes_leave_the_text_a_reader_sees() -> None:
    cleaned = clean_markdown(HUGO_PAGE)
    assert cleaned == (
        "## 使用 Pod\n\n**Pod** 是一组（一个或多个）容器。\n\n"
        "重启 Pod 中的容器不应与重启 Pod 混淆。\n"
    )


@pytest.mark.parametrize(
    ("heading", "read"),
    [
        ("## Install {#install}", "## Install"),
        ("### `v-if` {#v-if}", "### `v-if`"),
        ("## Options { #options .wide }", "## Options"),
        ("## Setup {: #setup}", "## Setup"),
        ("## Notes {.note}", "## Notes"),
        ("## 配置 {#config}   ", "## 配置"),
        ("## Two {#a} {#b}", "## Two"),
        ("### 该选哪一个？{#which-to-choose}", "### 该选哪一个？"),
        ("## Setup{#setup}", "## Setup"),
        ("## 安装 %{#installation}%", "## 安装"),
        ("## Store 是什么？%{#what-is-a-store}%", "## Store 是什么？"),
    ],
)
def test_a_heading_loses_its_attribute_block(heading: str, read: str) -> None:
    assert clean_markdown(heading + "\n\nText.") == read + "\n\nText."


@pytest.mark.parametrize(
    ("fence", "read"),
    [
        (":::", ""),
        ("::: tip", ""),
        (":::tip", ""),
        ("::: warning 注意", "注意"),
        (":::note Read this first", "Read this first"),
        (":::tip[Before you start]", "Before you start"),
        ("::: {.callout-note}", ""),
        (":::: code-group", ""),
        ("::: details Click to expand", "Click to expand"),
        ("    :::tip", ""),  # inside a list item
        ("\t:::", ""),
        ('!!! warning "注意"', "注意"),  # MkDocs (Material) admonitions and tabs
        ("!!! note", ""),
        ('!!! note inline end "Aside"', "Aside"),
        ('??? tip "Click to expand"', "Click to expand"),
        ("???+ example", ""),
        ('=== "pip"', "pip"),
        ('===+ "Tab 2"', "Tab 2"),
        ("/// tip | 提示", "提示"),  # pymdownx.blocks, as FastAPI's docs write them
        ("/// warning", ""),
        ("///", ""),
        ("//// tab | Python 3.10+", "Python 3.10+"),
        ("////", ""),
    ],
)
def test_a_container_fence_leaves_its_title(fence: str, read: str) -> None:
    assert reduce_site_syntax(fence) == read


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ('A {{< glossary_tooltip text="Pod" term_id="pod" >}} runs.', "A Pod runs."),
        ("A {{< tooltip title='Node' >}} runs.", "A Node runs."),
        ('{{< figure src="a.png" label="The plan" >}}', "The plan"),
        ('Version {{< param "version" >}} is out.', "Version  is out."),
        ("{{% note %}}Careful.{{% /note %}}", "Careful."),
        ("{{< tab name=Linux >}}", ""),
        ('See {{< ref "pods.md" >}}.', "See pods.md."),
    ],
)
def test_a_shortcode_leaves_its_shown_argument(text: str, read: str) -> None:
    assert reduce_site_syntax(text) == read


def test_an_admonitions_indented_body_is_prose() -> None:
    page = (
        '# Setup\n\n!!! warning "注意"\n\n    Do not use [the old API](https://x.test/api).\n\n'
        '=== "pip"\n\n    ```bash\n    pip install foo\n    ```\n\n'
        "Text.\n\n    indented code [a](https://z.test)\n"
    )
    assert clean_markdown(page) == (
        "# Setup\n\n注意\n\n    Do not use the old API.\n\n"
        "pip\n\n    ```bash\n    pip install foo\n    ```\n\n"
        "Text.\n\n    indented code [a](https://z.test)\n"
    )


def test_a_table_of_contents_marker_goes() -> None:
    assert clean_markdown("# Parsers\n\n[[toc]]\n\n## Custom\n\nText.") == (
        "# Parsers\n\n## Custom\n\nText."
    )
    assert clean_markdown("Intro.\n\n[TOC]\n\nText.") == "Intro.\n\nText."


def test_a_link_written_with_a_reference_shortcode_reads_as_its_text() -> None:
    page = 'See [the Pods page]({{< ref "pods.md" >}}) and [the API]({{< relref "/docs/api" >}}).'
    assert clean_markdown(page) == "See the Pods page and the API."


@pytest.mark.parametrize(
    "text",
    [
        "## A set {a, b}",  # no `#` or `.` opens it: not an attribute block
        "## {#if ...}",  # Svelte's template syntax as the whole title
        "### {#each list as item}",
        "## 100%{#x} sure",  # not at the end of the heading
        "See [[toc]] inline, or [TOC] in a sentence.",
        "A setext title\n===\n\nText.",  # `===` alone underlines a title
        "/// Returns the sum, a Rust doc comment quoted in prose",
        "a /// b",
        'Say "!!! note" or === in prose; !!! "untyped"',
        "#hashtag {#x}",  # no space after the `#`: not a heading
        "Anchors look like `{#id}` and {#id} in prose.",
        "Interpolate {{ message }} and {{ a < b }} in a template.",  # Vue, Jinja: not Hugo
        "Use :: for a literal block, and a ::: b in a line.",
        "A {{< shortcode that never closes",
    ],
)
def test_text_that_only_looks_like_generator_syntax_stays(text: str) -> None:
    assert clean_markdown(text) == text


def test_code_keeps_every_construct() -> None:
    page = (
        "Use `{{< note >}}` or `## A {#a}`.\n\n"
        "```markdown\n## Title {#title}\n::: tip\n{{< note >}}\n:::\n```\n"
    )
    assert clean_markdown(page) == page


def test_chunks_carry_headings_without_anchors() -> None:
    doc = Document(
        doc_id="guide/computed.md",
        text=VITEPRESS_PAGE,
        scope_id="s",
        locale="zh-CN",
        content_type=ContentType.MARKDOWN,
    )
    chunks = document_chunks(Chunker(), doc)
    assert chunks and all("{#" not in c.heading_path + c.text for c in chunks)
    assert chunks[0].heading_path.startswith("计算属性")


@pytest.mark.timeout(120)  # the hang guard: a rescan from every opening would take hours
@pytest.mark.parametrize(
    "hostile",
    [
        "# " + " " * 1_000_000 + "{#x",
        "# " + "{#" * 500_000,
        ":" * 1_000_000 + "x" * 300,
        "{{<" * 333_333,
        ("{{< " + "x" * 399) * 2_500,
        "{{% a" * 200_000,
        "!!! a" * 200_000,
        '=== "' * 200_000,
        "!!!" + " a" * 400_000,
        "///" * 300_000,
        "/// a |" + " " * 400_000 + "x",
    ],
)
def test_hostile_lines_are_read_in_linear_time(hostile: str) -> None:
    reduced = reduce_site_syntax(hostile)
    assert len(reduced) <= len(hostile)


@given(extra=st.integers(min_value=-3, max_value=3))
def test_each_construct_is_read_only_within_its_bound(extra: int) -> None:
    """Around the bounds: an anchor (either delimiters), a container's,
    admonition's, tab's or block's title and a shortcode one character within
    go (the title stays), one past stays as written."""
    anchor = "x" * (MAX_ATTRIBUTE_CHARS + extra)  # after the `#`
    heading = f"## Title {{#{anchor}}}"
    assert reduce_site_syntax(heading) == ("## Title" if extra <= 0 else heading)
    title = "t" * (MAX_ATTRIBUTE_CHARS + extra)
    fence = f"::: tip {title}"
    assert reduce_site_syntax(fence) == (title if extra <= 0 else fence)
    # Inside `{{<` and `>}}`: " x " and the arguments, then " ".
    arguments = "a" * (MAX_SHORTCODE_CHARS - 2 + extra)
    shortcode = f"{{{{< x {arguments} >}}}}"
    assert reduce_site_syntax(shortcode) == ("" if extra <= 0 else shortcode)
    delimited = f"## Title %{{#{anchor}}}%"
    assert reduce_site_syntax(delimited) == ("## Title" if extra <= 0 else delimited)
    admonition = f'!!! note "{title}"'
    assert reduce_site_syntax(admonition) == (title if extra <= 0 else admonition)
    tab = f'=== "{title}"'
    assert reduce_site_syntax(tab) == (title if extra <= 0 else tab)
    block = f"/// tip | {title}"
    assert reduce_site_syntax(block) == (title if extra <= 0 else block)


_FRAGMENTS = st.sampled_from(
    ["{#a}", "{: #b}", "{.c}", "{", "}", ":::", "::: tip T", "[T]", "{{<", ">}}", "{{%",
     "%}}", " x ", 'text="t"', "/", "## ", "# ", "\n", " ", "`", "```\n", "中文", "!!! ",
     "??? ", "===", '"', "note", "    ", "[[toc]]", "%{#d}%", "///",
     " | "]
)  # fmt: skip


@given(page=st.lists(_FRAGMENTS, max_size=30).map("".join))
def test_reducing_adds_no_character_and_cleaning_reaches_a_fixpoint(page: str) -> None:
    reduced = reduce_site_syntax(page)
    assert set(reduced) <= set(page) and len(reduced) <= len(page)
    cleaned = clean_markdown(page)
    assert clean_markdown(cleaned) == cleaned
