"""GNU Info manuals read as the text their reader shows.

The GNU projects' manuals (coreutils, grep, sed, find, gzip, wget, …) ship
as Info files (`/usr/share/info/sed.info.gz`; a long one split into
`find.info-1.gz`, `find.info-2.gz`). An Info file is plain text cut into
nodes by a control character (U+001F), each node opening with a header line
for the reader's navigation (`File: sed.info,  Node: Overview,  Next: …,
Up: …`), its title underlined as reST underlines one (`*` a chapter, `=` a
section, `-` a subsection, `.` below), and often closing with a menu of the
nodes under it (`* Menu:` and `* Overview::` lines). What a reader sees of a
node is its text; the headers, menus, what comes before the first node (the
installer's directory entry, a copying notice the first node repeats) and
the tag table the reader seeks with, and the reader's markers in a node
(`\0\b[index\0\b]`), are not shown as text. So those go, a
cross-reference `*Note Overview::` reads `see Overview`, and the rest stays
plain text, whose underlined titles the chunker reads as sections
(services.indexer.heading_syntax), the first one the page's title.
"""

from __future__ import annotations

import re

from services.sources.compressed_pages import page_name

# `sed.info`, `find.info-2` (and each `.gz`).
_INFO_NAME = re.compile(r"[^/.][^/]*\.info(?:-\d{1,4})?$", re.IGNORECASE)
NODE_SEPARATOR = "\x1f"
# Why a manual's file with no node text is left out: a split manual's first
# file (`find.info`) lists its parts (`find.info-1`, …), which are read.
INFO_INDEX_NOTE = (
    "named like an Info manual, but holds no node of its own: a split manual's index of its "
    "parts (which are read), or no Info manual"
)
# Parts that are the reader's index, not text: the tag table (with its end
# marker), the list of a split manual's files, Emacs's file variables.
_INDEX_PART = re.compile(r"\A(?:Tag Table:|End Tag Table|Indirect:|Local Variables:)")
# A menu's entry (`* Overview::  Invocation`, `* Options: Invoking.`) and the
# indented lines that continue its description.
_MENU_ENTRY = re.compile(r"\* [^:\n]{1,200}:(?::|[^\n]{0,200}[.,\t])")
_MENU_DESCRIPTION_INDENT = " " * 8
# A cross-reference: `*note Examples::`, `*Note Bugs: (sed)Reporting Bugs,`, its
# name maybe over two lines; a `see` already before it is not said twice.
_NOTE = re.compile(
    r"(?P<see>\b[Ss]ee[ \n]+)?\*(?P<n>[Nn])ote(?P<gap>[ \n]+)(?:(?P<name>[^:]{1,200})::)?"
)
# The reader's markers inside a node (`\0\b[index\0\b]` on an index node,
# `\0\b[image src="a.png"\0\b]`): control characters around an instruction
# to the reader, never shown.
_READER_MARKER = re.compile(r"\x00\x08\[[^\x00\n]{0,500}\x00\x08\]|\x00\x08")


def is_info_name(name: str) -> bool:
    """A file named like an Info manual or one of its parts (`find.info-2.gz`)."""
    return bool(_INFO_NAME.search(page_name(name).rsplit("/", 1)[-1]))


def info_as_text(source: str) -> str:
    """The manual's nodes as plain text (module docstring); nothing for a
    file without a node (a `.info` file that is no Info manual, such as Qdrant's
    `version.info`), which the loader then skips."""
    if NODE_SEPARATOR not in source:
        return ""
    # Before the first node: the program that made the file, the directory
    # entry and the copying notice, which the Top node repeats; a reader
    # opens the manual at its first node.
    kept: list[str] = []
    for part in source.split(NODE_SEPARATOR)[1:]:
        part = part.lstrip("\n")
        if _INDEX_PART.match(part):
            continue
        header, _, body = part.partition("\n")
        kept.append(_node(body if header.startswith("File: ") and "Node: " in header else part))
    return "\n\n".join(part.strip("\n") for part in kept if part.strip()) + "\n"


def _node(text: str) -> str:
    """A node's text without its menu's entries, references read as a reader
    reads them."""
    # The markers go first: one may stand on the menu's line.
    return _NOTE.sub(_reference, _without_menu(_READER_MARKER.sub("", text)))


def _without_menu(text: str) -> str:
    """The lines of a node that are not its menu: `* Menu:`, each entry and
    its description's continuation lines go; a menu's comments, and prose
    after the menu, stay."""
    lines = text.split("\n")
    try:
        start = lines.index("* Menu:")
    except ValueError:
        return text
    kept, in_entry = lines[:start], False
    for line in lines[start + 1 :]:
        if line == "* Menu:" or _MENU_ENTRY.match(line):
            in_entry = line != "* Menu:"
        elif not (in_entry and line.startswith(_MENU_DESCRIPTION_INDENT)):
            in_entry = False
            kept.append(line)
    return "\n".join(kept)


def _reference(found: re.Match[str]) -> str:
    see = found.group("see") or ("See " if found.group("n") == "N" else "see ")
    name = found.group("name")
    if name is None:
        return see if found.group("see") else see.rstrip() + found.group("gap")
    return see + " ".join(name.split())
