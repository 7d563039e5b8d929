"""roff's escape sequences read as the characters a manual page shows.

A manual page's source writes its glyphs and fonts as escapes: `\\-` for a
hyphen a reader copies into a command line, `\\(em` for a dash, `\\fB...\\fR`
for bold, `\\*(lq` for an opening quote, `\\,` and `\\/` (italic corrections,
help2man writes them around every argument). What a reader sees is the
glyph, or nothing: a font change, a size change, a motion, a number
register's value (unknowable without running the page's macros), a
zero-width break point. One regular-expression pass replaces every escape;
an escape this table does not know shows nothing, rather than its letters.
"""

from __future__ import annotations

import re

# Special characters by their roff names (groff_char(7)), those manual pages use.
GLYPHS = {
    "em": "\u2014",
    "en": "\u2013",
    "hy": "-",
    "mi": "-",
    "-": "-",
    "bu": "\u2022",
    "aq": "'",
    "dq": '"',
    "lq": "\u201c",
    "rq": "\u201d",
    "oq": "\u2018",
    "cq": "\u2019",
    "Fo": "\u00ab",
    "Fc": "\u00bb",
    "fo": "\u2039",
    "fc": "\u203a",
    "co": "\u00a9",
    "rg": "\u00ae",
    "tm": "\u2122",
    "R": "\u00ae",
    "Tm": "\u2122",
    "mu": "\u00d7",
    "di": "\u00f7",
    "+-": "\u00b1",
    "<=": "\u2264",
    ">=": "\u2265",
    "!=": "\u2260",
    "==": "\u2261",
    "->": "\u2192",
    "<-": "\u2190",
    "<>": "\u2194",
    "ua": "\u2191",
    "da": "\u2193",
    "de": "\u00b0",
    "ga": "`",
    "ha": "^",
    "ti": "~",
    "ba": "|",
    "bv": "|",
    "br": "|",
    "rs": "\\",
    "sl": "/",
    "pl": "+",
    "eq": "=",
    "sq": "\u25a1",
    "ci": "\u25cb",
    "ss": "\u00df",
    "ae": "\u00e6",
    "oe": "\u0153",
    "Aq": "'",
    "Lq": "\u201c",
    "Rq": "\u201d",
}
_SIMPLE = {
    "-": "-",
    "e": "\\",
    "\\": "\\",
    ".": ".",
    "'": "'",
    "`": "`",
    " ": " ",
    "~": " ",
    "0": " ",
    "_": "_",
    "t": "\t",
}
# `\X'…'` escapes whose quoted argument is drawn or measured, never shown.
_QUOTED = "bCDhHlLNoRSvwXZ"
_NAME = r"(?:\(..|\[[^\]\n]{0,40}\]|.)"
ESCAPE = re.compile(
    r"\\(?:"
    rf"(?P<quoted>[{_QUOTED}])'(?P<argument>[^'\n]{{0,200}})'"
    rf"|(?P<named>[*fFgkmMnVY]){_NAME}"
    r"|s[+-]?(?:\(..|\[[^\]\n]{0,40}\]|\d{1,2})"
    r"|(?P<glyph>\(..|\[[^\]\n]{1,40}\])"
    r"|(?P<char>.)"
    r"|$)",
    re.MULTILINE,
)


def without_escapes(text: str) -> str:
    """`text` with each escape replaced by what it shows (module docstring)."""
    return ESCAPE.sub(_shown, text)


def _shown(match: re.Match[str]) -> str:
    whole = match.group(0)
    if quoted := match.group("quoted"):
        argument = match.group("argument")
        numeral = quoted == "N" and argument.isascii() and argument.isdigit()
        return _character(int(argument)) if numeral else ""  # not `\\N'¹'`
    if match.group("named"):
        # Strings (`\*(lq`) may be glyph names; fonts, registers, colours show nothing.
        return _glyph(whole[2:]) if whole[1] == "*" else ""
    if glyph := match.group("glyph"):
        return _glyph(glyph)
    char = match.group("char")
    return _SIMPLE.get(char, "") if char is not None else ""


def _glyph(name: str) -> str:
    """A `(xx`, `[name]` or one-letter name as its character ("" unknown)."""
    if name.startswith("("):
        name = name[1:]
    elif name.startswith("["):
        name = name[1:-1]
    if name.startswith(("u", "char")) and (code := _code_point(name)) is not None:
        return _character(code)
    return GLYPHS.get(name, "")


def _code_point(name: str) -> int | None:
    """`u00E9` (groff's Unicode names) or `char233`."""
    digits, base = (name[1:], 16) if name.startswith("u") else (name[4:], 10)
    try:
        code = int(digits.split("_")[0], base)
    except ValueError:
        return None
    return code


def _character(code: int) -> str:
    """The character a code point names, or nothing for one no text holds (a
    control character, a surrogate, past U+10FFFF): `\\N'99999999'` is no
    reason to refuse a page."""
    if code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code < 0xE000 or code >= 0x110000:
        return ""
    return chr(code)


# A string's reference in copy mode: `\*x`, `\*(xx`, `\*[name]`; an escaped
# backslash (`\\*`) is matched as its own pair so it is never read as one.
_STRING_REFERENCE = re.compile(r"\\(?:\*(?:\((..)|\[([^\]\n]{1,40})\]|([^(\[\n]))|.)")
MAX_STRING_CHARS = 10_000
# What a page's strings may add to it in all, a few times its own size: a page
# that doubles a string in each definition, or references a long one on every
# line, is no reason to fill memory (the rest of its references show nothing).
PAGE_GROWTH = 4
PAGE_GROWTH_FLOOR = 100_000
_DEFINITION = re.compile(r"(\S+)[ \t]*(.*)")


class RoffStrings:
    """The strings a page defines (`.ds Wm \\fBtop\\fR`, `.as` appends, `.rm`
    removes), put in place of their references before a line is read, as
    roff does when it copies a line in: top(1) writes 1,100 of its words as
    strings. Values are kept with their escapes (read later with the line's);
    a reference to a name the page never defined is left for
    `without_escapes`, which knows the predefined glyph strings (`\\*(lq`).
    Each line is read once (`interpolated` is not applied to its own output),
    so the cost is linear in the page and `budget` characters at most."""

    def __init__(self, budget: int = PAGE_GROWTH_FLOOR) -> None:
        self.values: dict[str, str] = {}
        self.budget = budget

    def define(self, rest: str, append: bool = False) -> None:
        """`.ds name value` (or `.as`): a leading `"` lets a value start with blanks."""
        found = _DEFINITION.match(rest.lstrip())  # trailing blanks are the value's
        if not found:
            return
        name, value = found.group(1), found.group(2)
        value = value[1:] if value.startswith('"') else value
        if append:
            value = self.values.get(name, "") + value
        self.values[name] = value[:MAX_STRING_CHARS]

    def remove(self, rest: str) -> None:
        for name in rest.split():
            self.values.pop(name, None)

    def interpolated(self, line: str) -> str:
        """`line` with each defined string's value in place of its reference."""
        if not self.values or "\\*" not in line:
            return line
        return _STRING_REFERENCE.sub(self._value, line)

    def _value(self, match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        found = self.values.get(name) if name else None
        if found is None:
            return match.group(0)
        self.budget -= len(found)
        return found if self.budget >= 0 else ""
