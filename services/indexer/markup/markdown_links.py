"""Markdown links, images and link-reference definitions, reduced to their text.

A reader sees a link's text, never its target; a reference definition
(`[label]: target "title"`) is not shown at all. API references write
hundreds of them (`[`util.isArray()`]: util.md#utilisarrayobject`), usually
at the end of the page, and indexed as written they become chunks of
nothing else, filed under the page's last heading.

- Definitions follow CommonMark: up to three spaces of indent, on a line of
  their own, anywhere in the page; a footnote (`[^1]: ...`) is content and
  stays.
- `[text][label]`, `[label][]` and `[label]` become `text`/`label` when the
  page defines `label` (labels match case-insensitively, whitespace
  collapsed); without a definition they are literal text and stay.
- Inline links `[text](url)` become `text`. Nothing downstream reads a link
  target out of chunk text (the gateway's snippets drop targets, the widget
  shows snippets, evidence cites the page's own URL), and targets, often
  relative (`util.md#...`), only add noise to BM25 and the embedding. Only
  a target that looks like an address counts (a letter or digit and one of
  `/.#:?`, a path such as `/` or `./`, or `<...>`): the same syntax turns up
  in text that is not really Markdown, such as `[Ca(2+)](i)` (intracellular
  calcium) in a SciFact abstract indexed under its title as a Markdown
  heading, where the parenthesis is content. `[LICENSE](LICENSE)` therefore
  stays as written.
- Images become their alt text (by the same rule); a line made only of
  linked images is a row of badges (build status, version, licence) and is
  dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_TEXT = r"(?P<text>(?:\\.|[^\[\]\\]){0,999})"
# An inline link's text may also hold balanced brackets, one level deep, as
# CommonMark allows and changelogs write (`[[#14119] fix: …](https://…)`). A
# bracketed part that is itself a link or reference (`(` or `[` after it) is
# not taken, so `[a [b](u) c](v)` leaves the inner link to be read first; and
# only inline links: a manual's `[MMDDhhmm[[CC]YY][.ss]]` is no reference.
_BRACKETED = r"\[(?:\\.|[^\[\]\\]){0,80}\](?![(\[])"
_BRACKETED_TEXT = rf"(?P<text>(?:\\.|[^\[\]\\]|{_BRACKETED}){{0,999}})"
# Blanks are taken possessively (`\s*+`): a target, a title and the blanks
# around them otherwise share out a long run of blanks in every possible way
# before the match fails (`[a](` + 20,000 spaces + `x` took 10 s, holding the
# interpreter lock). A title follows a blank: the one before the (empty)
# target, or its own.
_DESTINATION = (
    r"\((?P<destination>\s*+(?:<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"""(?:(?:(?<=\s)|\s++)(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?\s*+)\)"""
)
_LABEL = r"\[(?P<label>(?:\\.|[^\[\]\\]){0,999})\]"
_IMAGE = re.compile(rf"(?<!\\)!\[{_TEXT}\](?:{_DESTINATION}|{_LABEL})?", re.DOTALL)
_LINK = re.compile(rf"(?<![\\!])\[{_TEXT}\](?:{_DESTINATION}|{_LABEL})?", re.DOTALL)
_BRACKETED_LINK = re.compile(rf"(?<![\\!])\[{_BRACKETED_TEXT}\]{_DESTINATION}", re.DOTALL)
DEFINITION = re.compile(  # possessive blanks, as in _DESTINATION
    r"^ {0,3}\[(?!\^)(?P<label>(?:\\.|[^\[\]\\]){1,999})\]:[ \t]*+\n?[ \t]*+"
    r"(?:<[^<>\n]*>|[^\s<>]\S*+)"
    r"""(?:[ \t]++(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*+$""",
    re.MULTILINE,
)

_SIMPLE_TARGET = r"""(?:\([^()\s]*(?:[ \t]+"[^"\n]*")?\)|\[[^\[\]\n]*\])"""
_LINKED_IMAGE = rf"\[[ \t]*!\[[^\[\]\n]*\]{_SIMPLE_TARGET}[ \t]*\]{_SIMPLE_TARGET}"
_HTML_LINKED_IMAGE = r"<a\s[^<>\n]*>[ \t]*<img\s[^<>\n]*>[ \t]*</a>"
_BADGE_LINE = re.compile(
    rf"^[ \t]*(?:(?:{_LINKED_IMAGE}|{_HTML_LINKED_IMAGE})[ \t]*)+$", re.MULTILINE
)

LabelKey = Callable[[str], str]


def take_definitions(text: str, key: LabelKey) -> tuple[str, set[str]]:
    """(`text` without its reference definitions, the keys of their labels)."""
    labels: set[str] = set()

    def remove(definition: re.Match[str]) -> str:
        label = key(definition.group("label"))
        if not label:  # `[ ]: x` is no definition
            return definition.group(0)
        labels.add(label)
        return ""

    return DEFINITION.sub(remove, text), labels


def reduce_links(text: str, defined: set[str], key: LabelKey) -> str:
    """Badge lines dropped, then images and links reduced to their text."""
    text = _BADGE_LINE.sub("", text)

    def replace(link: re.Match[str]) -> str:
        if link.group("destination") is not None:
            return link.group("text") if _is_address(link.group("destination")) else link.group(0)
        reference = link.group("label") or link.group("text")  # full, else collapsed/shortcut
        return link.group("text") if key(reference) in defined else link.group(0)

    # Images first: in `[![logo](a.png)](b)` the image is the link's text.
    text = _LINK.sub(replace, _IMAGE.sub(replace, text))
    return _BRACKETED_LINK.sub(replace, text) if "[" in text else text


def normalize_label(label: str) -> str:
    """A label as CommonMark compares it: case-folded, whitespace collapsed."""
    return " ".join(label.split()).casefold()


def bracket_starts(text: str) -> set[int]:
    """Offsets of the `[` that open a link, an image or a definition in `text`
    (references without a definition excluded: they are literal anyway)."""
    starts = {m.start() + 1 for m in _IMAGE.finditer(text) if _has_target(m)}
    starts |= {m.start() for m in _LINK.finditer(text) if _has_target(m)}
    starts |= {m.start() for m in _BRACKETED_LINK.finditer(text) if _has_target(m)}
    starts |= {text.index("[", m.start()) for m in DEFINITION.finditer(text)}
    return starts


def _has_target(link: re.Match[str]) -> bool:
    if link.group("destination") is not None:
        return _is_address(link.group("destination"))
    return link.group("label") is not None


def _is_address(destination: str) -> bool:
    """Whether an inline link's destination (title included) looks like one."""
    target = next(iter(destination.split()), "")
    if target.startswith(("<", "/", "./", "../")):  # `(/)`: the site's root
        return True
    return any(c.isalnum() for c in target) and any(c in "/.#:?" for c in target)
