"""The syntax documentation-site generators add to Markdown, reduced to what a reader sees.

Generators extend Markdown with constructs their renderer consumes and no
reader ever sees:

- a heading's attribute block, `## Computed Properties {#computed-properties}`
  (VitePress, VuePress, Docusaurus, Hugo, MkDocs' attr_list, Pandoc, and
  kramdown's `{: #id}`): the anchor the page links to. The Vue.js guide puts
  one after every heading, in every language, so its Chinese headings read
  `计算属性 {#computed-properties}` and each chunk's heading path carries the
  English slug;
- container fences, `::: tip`, `::: warning 注意`, `:::note[Title]`,
  `::: {.callout}` and the closing `:::` (markdown-it-container in VitePress
  and VuePress, Docusaurus admonitions, Pandoc fenced divs), also indented
  inside a list item: the box is drawn, its custom title shown, the fence
  itself never;
- MkDocs' admonitions and content tabs, `!!! warning "注意"`, `??? tip`,
  `=== "pip"` (Python-Markdown's admonition, pymdownx.details and
  pymdownx.tabbed, as Material for MkDocs sites write them): the box or tab
  is drawn with its title, the marker and the type never (the indented body
  is read as prose: services.indexer.markup.markdown_text); and the same
  blocks in pymdownx.blocks' syntax, `/// tip | 提示` to `///`, `//// tab |
  Python 3.10+` to `////` (FastAPI's docs, in every language), whose title
  stays;
- a table of contents marker alone on its line, `[[toc]]` or `[TOC]`: the
  generator draws the page's headings there, which the page holds anyway;
- Hugo shortcodes, `{{< glossary_tooltip text="Pod" term_id="pod" >}}`,
  `{{% note %}}`, `{{< /note >}}` (the Kubernetes site, in every language):
  the renderer replaces each; what a reader sees of one is its `text`,
  `title` or `label`, else nothing. `ref` and `relref` write a link's
  target (`[Pods]({{< ref "pods.md" >}})`): they leave the path, so the link
  reads as its text as any other link does.

Left as written they put slugs, container types and template syntax into
the text a question is compared with, and into heading paths. Each construct
is recognised on one line and only in prose (code is never passed here), and
its replacement is a part of it, so no character is added. Every pattern is
bounded, so a line of 1 MB of openings is scanned in linear time.
"""

from __future__ import annotations

import re

# The longest construct read, in characters: an attribute block's or a
# container title's content, and a shortcode's arguments. Anything longer is
# not what a generator writes and stays as text; the bounds also keep every
# scan linear.
MAX_ATTRIBUTE_CHARS = 200
MAX_SHORTCODE_CHARS = 400

# An ATX heading line, and the attribute block that may end it: `{#id .class
# key=value}`, `{: #id}`, `{.class}`, after the title (with or without a
# space: the Vue.js guide's Chinese pages write `该选哪一个？{#which-to-choose}`).
# A block with no title before it is the title: Svelte's docs head sections
# `## {#if ...}`, its template syntax. VitePress lets a site choose other
# delimiters: Pinia's and Vue Router's Chinese pages write `## 安装 %{#installation}%`.
_HEADING_LINE = re.compile(r"^ {0,3}#{1,6}[ \t][^\n]*", re.MULTILINE)
_HEADING_MARKS = re.compile(r" {0,3}#{1,6}")
_INSIDE_BLOCK = rf":?[ \t]*[#.][^{{}}\n]{{0,{MAX_ATTRIBUTE_CHARS}}}"
_ATTRIBUTE_BLOCK = re.compile(rf"(?:\{{{_INSIDE_BLOCK}\}}|%\{{{_INSIDE_BLOCK}\}}%)[ \t]*")
# `!!! type [classes] "Title"`, `???+ type`, `=== "Tab"`: a type and up to
# three more class words, then the title in double quotes, if any.
_MKDOCS_BLOCK = re.compile(
    r"^[ \t]*+(?:(?:!!!|\?\?\?\+?)(?:[ \t]++[A-Za-z][\w-]{0,40}+){1,4}+(?=[ \t]*+(?:\"|$))"
    rf'|===[!+]?(?=[ \t]*+"))(?:[ \t]*+"(?P<title>[^"\n]{{0,{MAX_ATTRIBUTE_CHARS}}})")?[ \t]*+$',
    re.MULTILINE,
)
# `/// type | Title` opening a block, `///` closing it (three or more slashes).
_SLASH_BLOCK = re.compile(
    r"^[ \t]*+/{3,}+(?:[ \t]*+[A-Za-z][\w-]{0,40}+)?"
    rf"(?:[ \t]*+\|[ \t]*+(?P<title>[^\n]{{0,{MAX_ATTRIBUTE_CHARS}}}))?[ \t]*+$",
    re.MULTILINE,
)
# A table of contents the generator draws in place of a marker line
# (`[[toc]]` in VitePress and VuePress, `[TOC]` in Python-Markdown and others).
_TOC_MARKER = re.compile(r"^[ \t]*(?:\[\[toc\]\]|\[toc\])[ \t]*$", re.MULTILINE | re.IGNORECASE)
# A container fence: three or more colons opening a line, a type word or an
# attribute block, then the title the box shows (`[Title]` in Docusaurus 3).
# Possessive runs: a line of a million colons is not re-read per colon.
_UP_TO = f"{{0,{MAX_ATTRIBUTE_CHARS}}}"
_CONTAINER_FENCE = re.compile(
    rf"^[ \t]*+:{{3,}}+[ \t]*+(?:\{{[^{{}}\n]{_UP_TO}\}}|[A-Za-z][\w-]{{0,40}}+)?[ \t]*+"
    rf"(?:\[(?P<bracketed>[^\]\n]{_UP_TO})\][^\n]{_UP_TO}|(?P<title>[^\n]{_UP_TO}))$",
    re.MULTILINE,
)
# `{{< name args >}}` / `{{% name args %}}` on one line, closing ones
# (`{{< /name >}}`) too. No brace inside, so one shortcode's scan stops at
# the next one's opening and a line of openings is read once.
_SHORTCODE_INSIDE = (
    rf"[ \t]*/?[ \t]*[A-Za-z0-9_][\w./-]{{0,80}}+[^\n{{}}]{{0,{MAX_SHORTCODE_CHARS}}}?"
)
_SHORTCODE = re.compile(
    rf"\{{\{{(?:<(?P<angled>{_SHORTCODE_INSIDE})>|%(?P<percent>{_SHORTCODE_INSIDE})%)\}}\}}"
)
_QUOTED = r"""(?:"(?P<double>[^"\n]*)"|'(?P<single>[^'\n]*)')"""
_LINK_TARGET = re.compile(r"[ \t]*(?:rel)?ref[ \t]+" + _QUOTED)
_SHOWN_ARGUMENT = re.compile(r"(?:^|[ \t])(?:text|title|label)[ \t]*=[ \t]*" + _QUOTED)


def reduce_site_syntax(text: str) -> str:
    """`text` (prose) with its generator syntax reduced (see the module docstring)."""
    if "{" in text:
        text = _HEADING_LINE.sub(_without_attributes, text)
        text = _SHORTCODE.sub(_shortcode_text, text)
    if ":::" in text:
        text = _CONTAINER_FENCE.sub(_container_title, text)
    if "[" in text:
        text = _TOC_MARKER.sub("", text)
    if "!!!" in text or "???" in text or "===" in text:
        text = _MKDOCS_BLOCK.sub(_block_title, text)
    if "///" in text:
        text = _SLASH_BLOCK.sub(_block_title, text)
    return text


def _block_title(block: re.Match[str]) -> str:
    return (block.group("title") or "").strip()


def _without_attributes(heading: re.Match[str]) -> str:
    """The heading line without the attribute block at its end, if it has one."""
    line = heading.group()
    opening = line.rfind("{", 0, len(line) - 1)
    if opening > 0 and line[opening - 1] == "%":
        opening -= 1
    block = _ATTRIBUTE_BLOCK.fullmatch(line, opening) if opening > 0 else None
    title = line[:opening].rstrip(" \t")
    if block is None or _HEADING_MARKS.fullmatch(title):
        return line
    return title


def _shortcode_text(shortcode: re.Match[str]) -> str:
    inside = shortcode.group("angled") or shortcode.group("percent")
    shown = _LINK_TARGET.match(inside) or _SHOWN_ARGUMENT.search(inside)
    if shown is None:
        return ""
    return shown.group("double") if shown.group("double") is not None else shown.group("single")


def _container_title(fence: re.Match[str]) -> str:
    title = fence.group("bracketed")
    return (title if title is not None else fence.group("title") or "").strip()
