"""Manual pages read from their roff source, as the Markdown a reader sees.

A folder of manual pages (`/usr/share/man/zh_CN/man1/ls.1.gz`, a project's
`doc/tool.8`) holds roff: text lines between control lines (`.SH NAME`,
`.TP`, `.Op Fl v`) and escapes (services.sources.roff_escapes). A reader
sees the page rendered, so both macro packages manual pages are written in
are read here, in one pass, line by line:

- man(7) (GNU and Linux pages, help2man's output, manpages-zh): `.TH` names
  the page (its H1: `LS(1)`, as man and mandoc title it), `.SH`/`.SS` are its
  sections, `.PP`/`.TP`/`.IP` its paragraphs and tagged items, `.B`, `.BR`
  and their kin its fonts (the words stay, joined as the macro joins them),
  `.nf`/`.EX` blocks its examples (kept as code);
- mdoc(7) (BSD pages: OpenSSH's `scp.1`, `ssh_config.5`): `.Dt` names the
  page, `.Sh`/`.Ss` are its sections, and each semantic macro shows what it
  stands for: `.Fl v` `-v`, `.Xr ssh 1` `ssh(1)`, `.Op ...` `[...]`,
  `.Nm` the page's name, `.Nd` its one-line description.

What draws or defines rather than shows (macro definitions `.de ... ..`,
conditionals `.if`/`.ie`/`.el` with their `\\{ ... \\}` blocks, registers,
spacing and indentation requests, comments) goes; an unknown request goes
with its line, since its arguments are settings, not text. A page's strings
(`.ds`, `.as`) are put in place of their references (`\\*(AM`) as a line is
read, as roff copies it in. Tables (`.TS`) keep their cells, separated by
` | `. The Markdown is escaped where roff text would read as Markdown syntax
(a line opening with `#`), so the page's words reach the index as written.
Every line is read once: linear time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from services.sources.compressed_pages import page_name
from services.sources.manual_macros import MDOC_INLINE, mdoc_words
from services.sources.roff_escapes import (
    PAGE_GROWTH,
    PAGE_GROWTH_FLOOR,
    RoffStrings,
    without_escapes,
)

# `ls.1`, `printf.3p`, `openssl.1ssl`, `readline.3readline`, Tcl's `.n` (and
# each `.gz`); a shared library's `libfoo.so.1` is no page.
_PAGE_NAME = re.compile(r"^(?!lib[^/]*\.so\.)[^.].*\.(?:[0-9][a-z]{0,10}|n)$", re.IGNORECASE)
# A roff source names itself in its first lines: a comment, a title or a section.
_ROFF_START = re.compile(r"^(?:\.\\\"|'\\\"|\.TH |\.Dd|\.Dt |\.SH|\.Sh |\.so )", re.MULTILINE)
ROFF_SNIFF_CHARS = 4000
# Why a page that shows nothing is left out: most are `.so man1/foo.1`, another
# name for a page the folder holds (every `man3` has hundreds).
MANUAL_ALIAS_NOTE = (
    "named like a manual page, but shows no text of its own (an alias: `.so` of another "
    "page) or holds no roff"
)
_FONT_JOINED = frozenset({"BR", "RB", "BI", "IB", "IR", "RI"})
_FONT_SPACED = frozenset({"B", "I", "SM", "SB"})
_PARAGRAPH = frozenset({"PP", "LP", "P", "HP", "Pp", "Lp", "sp", "Bl", "El", "Bd", "Ed", "Rs"})
# Requests and macros whose arguments are settings (a date, spacing on or off).
_SETTINGS = frozenset({"Dd", "Os", "Sm", "Bk", "Ek"})
_CODE_START = frozenset({"nf", "EX"})
_CODE_END = frozenset({"fi", "EE"})
_TABLE_TAB = re.compile(r"tab\s*\((.)\)")
_MAX_NESTING = 16  # conditionals in one line's condition chain (real pages: 2-3)
# One argument: quoted (to its closing quote or the line's end), or a run of
# non-blanks and escapes. Linear: the alternatives start differently.
_ARGUMENT = re.compile(r'"((?:[^"]|"")*)(?:"|$)|((?:\\.|[^\s\\])+)')
_REQUEST_NAME = re.compile(r"([^\s\\]+)[ \t]*(.*)")
# A string definition that a trailing `\` continues onto the next line (top(1)).
_CONTINUED_DEFINITION = re.compile(r"[.'][ \t]*(?:ds|as)1?[ \t]")
_END_OF_DEFINITION = re.compile(r"^\.[ \t]*\.[ \t]*$")
_BLOCK_OPEN = re.compile(r"\\\{")
_BLOCK_CLOSE = re.compile(r"\\\}")


def is_manual_page_name(name: str) -> bool:
    """A file named like a manual page: `<name>.<section digit>[suffix]`, or
    that compressed (`ls.1.gz`)."""
    return bool(_PAGE_NAME.match(page_name(name).rsplit("/", 1)[-1]))


def is_roff(source: str) -> bool:
    """Whether a file named like a manual page holds roff (a rotated log,
    `changelog.1.gz`, is named like one and holds plain text)."""
    return bool(_ROFF_START.search(source[:ROFF_SNIFF_CHARS]))


def manual_page_markdown(source: str) -> str:
    """The page as Markdown (module docstring); text without a single roff
    control line comes back with only its escapes read."""
    budget = PAGE_GROWTH * len(source) + PAGE_GROWTH_FLOOR
    return "\n".join(_ManualPage(budget).lines(source.splitlines())).strip() + "\n"


class _ManualPage:
    """The reading state of one page: the title and name seen, whether the
    line is inside a code block, a table, a definition or a conditional."""

    def __init__(self, strings_budget: int) -> None:
        self.name = ""  # mdoc's `.Nm` name, for the bare `.Nm` that repeats it
        self.code = False
        # A table's part: None outside one, then "options", "format" (to the
        # line ending in `.`) and "rows".
        self.table: str | None = None
        self.skipping = False  # inside a `.de`/`.ig` block, which `..` ends
        self.braces = 0  # open `\{` of a conditional's block
        self.nesting = 0  # conditionals whose one-line body is being read (`.if n .if t x`)
        self.link = ""  # `.UR`/`.MT`'s address, shown at `.UE`/`.ME`
        self.tab = "\t"  # a table's cell separator (its `tab(:)` option)
        self.heading_next = ""  # `.SH` alone: the next text line is the heading
        self.prefix = ""  # a list item's marker, put before the next text line
        self.last_ie = True  # whether the last `.ie` was taken (its `.el` is not)
        # Macros the page defines (`.de URL`) → whether their text shows an argument.
        self.defined: dict[str, bool] = {}
        self.defining = ""  # the macro whose definition is being skipped
        # `.ds` strings, put in place once as each line is read.
        self.strings = RoffStrings(strings_budget)

    def lines(self, source: list[str]) -> Iterator[str]:
        continued: list[str] = []  # `.ds ZX one \` goes on with the next line
        for line in source:
            if _CONTINUED_DEFINITION.match(continued[0] if continued else line) and (
                _ends_escaped(line)
            ):
                continued.append(line[:-1])
                continue
            yield from self._line("".join(continued) + line)
            continued = []
        if continued:
            yield from self._line("".join(continued))
        if self.code:
            yield "```"

    def _line(self, line: str) -> Iterator[str]:
        if self.skipping:
            # `..` ends a definition, also written `.  .` inside an indented block.
            if _END_OF_DEFINITION.match(_uncommented(line)):
                self.skipping, self.defining = False, ""
            elif self.defining and line[:1] not in (".", "'") and "\\$" in line:
                self.defined[self.defining] = True
            return
        if self.braces:
            self.braces += len(_BLOCK_OPEN.findall(line)) - len(_BLOCK_CLOSE.findall(line))
            self.braces = max(self.braces, 0)
            return
        line = _uncommented(line)
        if not self.nesting:  # once per line: a conditional's body is not copied in again
            line = self.strings.interpolated(line)
        if line[:1] in (".", "'"):
            yield from self._request(line[1:].strip())
        elif self.table is not None:
            yield from self._table_line(line)
        elif self.code:
            yield without_escapes(line)
        else:
            yield from self._text(without_escapes(line))

    def _text(self, text: str) -> Iterator[str]:
        if not text.strip():
            yield ""
            return
        if self.heading_next:
            yield f"\n{self.heading_next} {text.strip()}"
            self.heading_next = ""
            return
        yield self.prefix + _markdown_safe(text)
        self.prefix = ""

    def _request(self, body: str) -> Iterator[str]:
        # A name ends at a blank or an escape: pod2man writes `.el\{\`.
        named = _REQUEST_NAME.match(body)
        if not named:
            return
        name, rest = named.group(1), named.group(2)
        if name in ("if", "ie", "el", "while"):
            yield from self._conditional(name, rest)
        elif name in ("ds", "ds1", "as", "as1"):
            self.strings.define(rest, append=name.startswith("as"))
        elif name == "rm":
            self.strings.remove(rest)
        elif name in ("de", "de1", "am", "ig"):
            self.skipping = True
            if name != "ig" and (defined := _arguments(rest)):
                self.defining = defined[0]
                self.defined.setdefault(self.defining, False)
        elif self.defined.get(name):
            # The page's own macro whose text shows its arguments (`.URL
            # https://… "the site"`); others (pod2man's `.IX` index entries,
            # rst2man's `.INDENT 3.5`) show nothing, as unknown requests.
            yield _markdown_safe(_words(rest))
        elif name == "TS":
            self.table, self.tab = "options", "\t"
        elif name == "T&" and self.table is not None:
            self.table = "format"  # a new format for the rows that follow
        elif name == "TE":
            self.table = None
        elif name in _CODE_START or name in _CODE_END:
            yield from self._code(name in _CODE_START)
        elif name == "Bd" and ("-literal" in rest or "-unfilled" in rest):
            yield from self._code(True)
        elif name == "Ed" and self.code:
            yield from self._code(False)
        else:
            yield from self._macro(name, rest.strip())

    def _conditional(self, name: str, rest: str) -> Iterator[str]:
        """A conditional's body read when its condition holds as man renders
        the page (nroff, groff), skipped otherwise or when it cannot be told."""
        if name == "el":
            taken, body = not self.last_ie, rest
        else:
            taken, body = condition(rest) if name != "while" else (False, rest)
            if name == "ie":
                self.last_ie = taken
        body = body.strip()
        if body.startswith("\\{"):
            if not taken:
                opened = len(_BLOCK_OPEN.findall(body)) - len(_BLOCK_CLOSE.findall(body))
                self.braces = max(opened, 0)
                return
            body = body[2:].strip()
        if taken and body and body not in ("\\", "\\}") and self.nesting < _MAX_NESTING:
            self.nesting += 1
            try:
                yield from self._line(body)
            finally:
                self.nesting -= 1

    def _code(self, start: bool) -> Iterator[str]:
        if start != self.code:
            self.code = start
            yield "```" if start else "```\n"

    def _macro(self, name: str, rest: str) -> Iterator[str]:
        if name in ("SH", "Sh", "SS", "Ss"):
            yield from self._code(False)
            level = "##" if name in ("SH", "Sh") else "###"
            if heading := _words(rest):
                yield f"\n{level} {heading}"
            else:
                self.heading_next = level
        elif name in ("TH", "Dt"):
            title, section = [*_arguments(rest), "", ""][:2]
            self.name = self.name or title.lower()
            shown = without_escapes(title)
            yield f"# {shown}({section})" if section else f"# {shown}"
        elif name in _PARAGRAPH:
            yield ""
        elif name in _SETTINGS:
            return
        elif name in ("TP", "It", "IP", "TQ"):
            yield from self._item(name, rest)
        elif name == "br":
            yield "  "  # a Markdown line break: the next text starts a line
        elif name in _FONT_JOINED:
            yield _markdown_safe("".join(without_escapes(a) for a in _arguments(rest)))
        elif name in _FONT_SPACED:
            yield _markdown_safe(_words(rest))
        elif name in ("UR", "MT", "UE", "ME", "SY", "OP", "YS"):
            yield from self._link_or_synopsis(name, rest)
        elif name in MDOC_INLINE:
            yield from self._mdoc(name, rest)

    def _item(self, name: str, rest: str) -> Iterator[str]:
        """A tagged or bulleted item starts a block: `.TP`'s tag is the next
        line (text or a font macro's), `.IP`'s and `.It`'s are arguments."""
        yield ""
        if name in ("TP", "TQ"):
            return
        tag = self._mdoc_line(rest) if name == "It" else _words(" ".join(_arguments(rest)[:1]))
        if tag in ("\u2022", "*", "-", "o"):
            self.prefix = "- "
        elif tag:
            yield _markdown_safe(tag)

    def _link_or_synopsis(self, name: str, rest: str) -> Iterator[str]:
        arguments = [without_escapes(a) for a in _arguments(rest)]
        if name == "OP":
            yield "[" + " ".join(arguments) + "]"
        elif name in ("UR", "MT"):
            self.link = arguments[0] if arguments else ""
        elif name in ("UE", "ME"):
            shown = f"<{self.link}>" if self.link else ""
            self.link = ""
            if shown or arguments:
                yield shown + "".join(arguments)
        elif name == "SY" and arguments:
            yield " ".join(arguments)

    def _mdoc(self, name: str, rest: str) -> Iterator[str]:
        if name == "Nm" and rest and not self.name:
            self.name = _arguments(rest)[0]
        if text := self._mdoc_line(f"{name} {rest}"):
            yield _markdown_safe(text)

    def _mdoc_line(self, line: str) -> str:
        return mdoc_words([without_escapes(a) for a in _arguments(line)], self.name)

    def _table_line(self, line: str) -> Iterator[str]:
        if self.table == "options" and not line.rstrip().endswith(";"):
            self.table = "format"
        if self.table == "options" and (tab := _TABLE_TAB.search(line)):
            self.tab = tab.group(1)
        if self.table in ("options", "format"):
            if line.rstrip().endswith("."):
                self.table = "rows"
            return
        cells = [
            without_escapes(c).replace("T{", "").replace("T}", "") for c in line.split(self.tab)
        ]
        if row := " | ".join(cell.strip() for cell in cells if cell.strip() not in ("", "_", "=")):
            yield _markdown_safe(row)


def condition(rest: str) -> tuple[bool, str]:
    """Whether a conditional's condition holds, and the body after it: `n`
    (nroff: yes), `t`, `e`, `o` (no), groff's `\\n(.g` (yes), a string
    comparison `'a'b'`; any other (a number expression) is taken as false."""
    text = rest.lstrip()
    negated = text.startswith("!")
    text = text[1:] if negated else text
    held = False
    if text[:1] in ("n", "t", "e", "o") and text[1:2] in ("", " ", "\\", "."):
        held, text = text[0] == "n", text[1:]
    elif text.startswith(("\\n(.g", "\\n[.g]")):
        held, text = True, text[5 if text[2] == "(" else 6 :]
    elif text[:1] and not text[0].isalnum() and text[0] not in "\\(":
        parts = text[1:].split(text[0], 2)
        held, text = (parts[0] == parts[1], parts[2]) if len(parts) == 3 else (False, "")
    else:
        text = text.split(None, 1)[1] if len(text.split(None, 1)) == 2 else ""
    return held != negated, text


def _ends_escaped(line: str) -> bool:
    """Whether the line ends in a backslash that escapes its line break."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _uncommented(line: str) -> str:
    """The line without its `\\"` or `\\#` comment (an escaped backslash stays)."""
    at = re.search(r'(?<!\\)(?:\\\\)*\\["#]', line)
    return line[: at.start() + (len(at.group(0)) - 2)] if at else line


def _arguments(rest: str) -> list[str]:
    """A macro's arguments: words (an escaped space `\\ ` inside one), or
    "quoted words" (`""` a quote inside; an unclosed quote runs to the end)."""
    return [
        found.group(1).replace('""', '"') if found.group(1) is not None else found.group(2)
        for found in _ARGUMENT.finditer(rest)
    ]


def _words(rest: str) -> str:
    return " ".join(without_escapes(a) for a in _arguments(rest))


def _markdown_safe(text: str) -> str:
    """A line of text that Markdown would not read as a heading or a fence."""
    stripped = text.lstrip()
    if stripped.startswith(("#", "```", "~~~")):
        return text.replace(stripped[0], "\\" + stripped[0], 1)
    return text
