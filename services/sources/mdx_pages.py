"""MDX pages read as the Markdown a reader sees.

MDX is Markdown with JavaScript in it, the page format of Docusaurus,
Nextra, Mintlify, Astro Starlight and Storybook docs; a site written in it
may hold no `.md` page at all. What a reader of the rendered page sees is
the Markdown, with each component's own text where the component stood, so:

- an ESM block (a line opening with `import` or `export` outside code, to
  the next blank line, as MDX reads it) goes: it is code, not prose;
- a JSX comment `{/* … */}` goes;
- a JSX tag, whose name starts with a capital or holds a dot (`<Tabs>`,
  `<TabItem value="mac" label="macOS">`, `</Callout>`, `<Foo.Bar />`, the
  fragments `<>` `</>`), goes and its content stays, as HTML tags in
  Markdown do (services.indexer.markup.markdown_html reduces those); its
  attributes may span lines and hold `{…}` expressions;
- code (fenced blocks, inline spans) is left exactly as written: an example
  may well show an `import` or a `<Tabs>`.

Other `{expressions}` stay as written: they are rare in prose and a reader
sees some value in their place. Each rule is bounded (a tag is read over at
most `MAX_TAG_CHARS`), so any text is read in linear time.
"""

from __future__ import annotations

import re

MDX_SUFFIX = ".mdx"
MAX_TAG_CHARS = 2_000  # a component's opening tag with its attributes
MAX_COMMENT_CHARS = 2_000  # a JSX comment
_FENCE_OPEN = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})")
_ESM = re.compile(r"(?:import|export)(?=[\s{*'\"])")
# What the prose is scanned for, the first found first: an inline code span
# (kept as written; the same bounds as services.sources.template_sources), a
# JSX comment's opening, the start of a JSX tag (its name; `<>`, `</>`).
_MARKS = re.compile(
    r"(?P<code>(?<!`)(?P<run>`{1,16})(?!`)[\s\S]{0,1000}?(?<!`)(?P=run)(?!`))"
    r"|(?P<comment>\{/\*)"
    r"|(?P<tag><(?:/?)(?:[A-Z]\w*(?:\.\w+)*|[a-z]\w*(?:\.\w+)+|(?=>)))"
)


def mdx_as_markdown(text: str) -> str:
    """`text` (an MDX page) as Markdown: module docstring."""
    out: list[str] = []
    for prose, code in _segments(text):
        out.append(_prose(prose))
        out.append(code)
    return "".join(out)


def _segments(text: str) -> list[tuple[str, str]]:
    """(prose, the code block after it) pairs covering `text`: fenced code is
    cut out whole (a fence never closed runs to the end, as in CommonMark)."""
    pairs: list[tuple[str, str]] = []
    prose: list[str] = []
    code: list[str] = []
    fence = ""
    for line in text.splitlines(keepends=True):
        if fence:
            code.append(line)
            stripped = line.strip()
            if len(stripped) >= len(fence) and stripped == fence[0] * len(stripped):
                pairs.append(("".join(prose), "".join(code)))
                prose, code, fence = [], [], ""
        elif opened := _FENCE_OPEN.match(line):
            fence = opened.group(1)
            code.append(line)
        else:
            prose.append(line)
    pairs.append(("".join(prose), "".join(code)))
    return pairs


def _prose(text: str) -> str:
    text = _without_esm(text)
    kept: list[str] = []
    last = position = 0
    unclosed_to = 0  # no `*/}` before here from where a comment was last looked for
    while found := _MARKS.search(text, position):
        position = found.end()
        if found["code"]:
            continue
        if found["comment"]:
            limit = position + MAX_COMMENT_CHARS
            closing = text.find("*/}", max(position, unclosed_to), limit)
            if closing < 0:
                unclosed_to = limit - 2  # a `*/}` may straddle the limit
                continue
            position = closing + 3
        elif found["tag"]:
            closed, position = _tag_end(text, found.end())
            if not closed:
                continue
        kept.append(text[last : found.start()])
        last = position
    kept.append(text[last:])
    return "".join(kept)


def _without_esm(text: str) -> str:
    """Lines of ESM blocks (from an unindented `import`/`export` line to the
    next blank line) left out."""
    kept: list[str] = []
    in_block = False
    for line in text.splitlines(keepends=True):
        if not line.strip():
            in_block = False
        elif not in_block and _ESM.match(line):
            in_block = True
        if not in_block:
            kept.append(line)
    return "".join(kept)


def _tag_end(text: str, start: int) -> tuple[bool, int]:
    """(whether it closes, where to go on) for a JSX tag whose name ends at
    `start`: attributes are skipped with their quoted strings and `{…}`
    expressions to the `>` that closes the tag (True, after it). A `<` first
    (outside quotes and braces), or no `>` within MAX_TAG_CHARS, makes it text
    (False, where the reading stopped, so no character is read twice)."""
    depth, quote = 0, ""
    end = min(len(text), start + MAX_TAG_CHARS)
    for i in range(start, end):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'" or (ch == "`" and depth > 0):
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        elif ch == ">" and depth == 0:
            return True, i + 1
        elif ch == "<" and depth == 0:
            return False, i  # another tag opens first: this one was text
    return False, end
