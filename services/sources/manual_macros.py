"""mdoc(7)'s semantic macros, as the words a rendered BSD manual page shows.

An mdoc line is a macro and its arguments, among which further macros may be
called: `.Op Fl c Ar cipher` shows `[-c cipher]`, `.Xr ssh 1 ,` shows
`ssh(1),`. Read left to right: a macro name switches how the words after it
show (`Fl` puts `-` before each, `Xr` joins a name and its section), an
enclosing macro (`Op`, `Dq`, `Pq`, …) opens its bracket and closes it at the
end of the line or at its closing macro (`Oc`, `Dc`, …), and punctuation
attaches to the word before it, as mandoc renders them.
"""

from __future__ import annotations

from collections.abc import Sequence

# Enclosing macros: the bracket each opens, and (for those closed on the line
# by a macro of their own) which closes it.
_ENCLOSING = {
    "Op": ("[", "]"),
    "Dq": ("\u201c", "\u201d"),
    "Qq": ('"', '"'),
    "Sq": ("\u2018", "\u2019"),
    "Ql": ("\u2018", "\u2019"),
    "Pq": ("(", ")"),
    "Bq": ("[", "]"),
    "Brq": ("{", "}"),
    "Aq": ("<", ">"),
}
_OPENING = {
    "Oo": "[", "Do": "\u201c", "Qo": '"', "So": "\u2018", "Po": "(", "Bo": "[",
    "Bro": "{", "Ao": "<",
}  # fmt: skip
_CLOSING = {
    "Oc": "]", "Dc": "\u201d", "Qc": '"', "Sc": "\u2019", "Pc": ")", "Bc": "]",
    "Brc": "}", "Ac": ">",
}  # fmt: skip
# Macros whose words show as written (semantic markup only).
_SHOWN = frozenset({
    "Ar", "Cm", "Ic", "Li", "Em", "Sy", "Pa", "Va", "Ev", "Er", "Dv", "Fn", "Fa", "Ft", "Cd",
    "Ad", "Ms", "Tn", "Ux", "No", "An", "Mt", "Lk", "Vt", "Lb", "St", "Sx", "Tg", "Nd", "Pf",
})  # fmt: skip
# One-line displays, and a reference's fields (author, title, report, date, …).
_SHOWN_LINES = frozenset({
    "D1", "Dl", "%A", "%B", "%C", "%D", "%I", "%J", "%N", "%O", "%P", "%Q", "%R", "%T", "%U", "%V",
})  # fmt: skip
# Macros that show fixed words.
_FIXED = {
    "At": "AT&T UNIX",
    "Bx": "BSD",
    "Bsx": "BSD/OS",
    "Fx": "FreeBSD",
    "Nx": "NetBSD",
    "Ox": "OpenBSD",
    "Dx": "DragonFly",
    "Ex": "The {name} utility exits 0 on success, and >0 if an error occurs.",
    "Rv": "The function returns the value 0 if successful; otherwise -1 is returned "
    "and errno is set to indicate the error.",
}
# Macros that show nothing themselves (the words after them still do).
_SILENT = frozenset(
    {
        "Bk",
        "Ek",
        "Os",
        "Dd",
        "Sm",
        "Ns",
        "Ta",
        "Fo",
        "Fc",
        "In",
        "Xo",
        "Xc",
        "Es",
        "En",
        "Ud",
        "Re",
        "Rs",
    }
)
MDOC_INLINE = frozenset(
    {
        *_ENCLOSING,
        *_OPENING,
        *_CLOSING,
        *_SHOWN,
        *_SHOWN_LINES,
        *_FIXED,
        *_SILENT,
        "Nm",
        "Fl",
        "Xr",
    }
)
_NO_SPACE_BEFORE = frozenset({".", ",", ":", ";", ")", "]", "?", "!"})
_NO_SPACE_AFTER = frozenset({"(", "["})


def mdoc_words(tokens: Sequence[str], page_name: str) -> str:
    """The text one mdoc line shows; `tokens[0]` is its macro, `page_name`
    what a bare `Nm` shows."""
    return _Line(page_name).read(tokens)


class _Line:
    def __init__(self, page_name: str) -> None:
        self.page_name = page_name
        self.out: list[str] = []
        self.glue = True  # no space before the next word
        self.mode = ""  # the macro the words now belong to
        self.words_in_mode = 0
        self.closers: list[str] = []
        self.pending: list[str] = []  # an `Xr`'s name and section

    def read(self, tokens: Sequence[str]) -> str:
        # Punctuation ending the line goes after the brackets the line closes:
        # `.Pq see Dq Ciphers .` shows `(see “Ciphers”).`
        end = len(tokens)
        while end > 1 and tokens[end - 1] in _NO_SPACE_BEFORE:
            end -= 1
        for token in tokens[:end]:
            if token in MDOC_INLINE:
                self._macro(token)
            elif self.mode not in _FIXED:  # `.Ex -std scp`: settings, not words
                self._word(token)
        self._end_mode()
        while self.closers:
            self._put(self.closers.pop(), attach=True)
        for mark in tokens[end:]:
            self._put(mark, attach=True)
        return "".join(self.out).strip()

    def _end_mode(self) -> None:
        """What a macro shows without words: `Nm` the page's name, `Fl` a dash."""
        self._flush_xr()
        if not self.words_in_mode:
            self._put({"Nm": self.page_name, "Fl": "-"}.get(self.mode, ""))

    def _macro(self, name: str) -> None:
        self._end_mode()
        self.mode, self.words_in_mode = name, 0
        if name in _ENCLOSING:
            opening, closing = _ENCLOSING[name]
            self._put(opening)
            self.glue = True
            self.closers.append(closing)
        elif name in _OPENING:
            self._put(_OPENING[name])
            self.glue = True
        elif name in _CLOSING:
            if self.closers:
                self.closers.pop()
            self._put(_CLOSING[name], attach=True)
        elif name in _FIXED:
            self._put(_FIXED[name].replace("{name}", self.page_name).replace("  ", " "))
        elif name == "Ns":
            self.glue = True
        elif name == "Nd":
            self._put("\u2014")

    def _word(self, word: str) -> None:
        self.words_in_mode += 1
        if word in _NO_SPACE_BEFORE:
            self._put(word, attach=True)
            return
        if self.mode == "Xr":
            self.pending.append(word)
            if len(self.pending) == 2:
                self._flush_xr()
            return
        self._put(f"-{word}" if self.mode == "Fl" else word)
        if word in _NO_SPACE_AFTER:
            self.glue = True

    def _flush_xr(self) -> None:
        if self.pending:
            name, *section = self.pending
            self.pending = []
            self._put(f"{name}({section[0]})" if section else name)

    def _put(self, text: str, attach: bool = False) -> None:
        if not text:
            return
        if self.out and not (attach or self.glue):
            self.out.append(" ")
        self.out.append(text)
        self.glue = False
