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
INFO_INDEX_NOTE = "an Info manual's index of its parts, which are read in its place"
_NODE_HEADER = re.compile(r"\AFile: [^\n]*Node: [^\n]*\n")
# Parts that are the reader's index, not text: the tag table (with its end
# marker), the list of a split manual's files, Emacs's file variables.
_INDEX_PART = re.compile(r"\A(?:Tag Table:|End Tag Table|Indirect:|Local Variables:)")
_MENU = re.compile(r"^\* Menu:.*", re.MULTILINE | re.DOTALL)
_NOTE = re.compile(r"\*[Nn]ote[ \n]+([^:\n]{1,200})::")
_NOTE_OPEN = re.compile(r"\*([Nn])ote([ \n])")
_SEE = {"N": "See", "n": "see"}
# The reader's markers inside a node (`\0\b[index\0\b]` on an index node,
# `\0\b[image src="a.png"\0\b]`): control characters around an instruction
# to the reader, never shown.
_READER_MARKER = re.compile(r"\x00\x08\[[^\x00\n]{0,500}\x00\x08\]|\x00\x08")


def is_info_name(name: str) -> bool:
    """A file named like an Info manual or one of its parts (`find.info-2.gz`)."""
    return bool(_INFO_NAME.search(page_name(name).rsplit("/", 1)[-1]))


def info_as_text(source: str) -> str:
    """The manual's nodes as plain text (module docstring)."""
    # Before the first node: the program that made the file, the directory
    # entry and the copying notice, which the Top node repeats; a reader
    # opens the manual at its first node.
    kept: list[str] = []
    for part in source.split(NODE_SEPARATOR)[1:]:
        part = part.lstrip("\n")
        if _INDEX_PART.match(part):
            continue
        kept.append(_node(_NODE_HEADER.sub("", part, count=1)))
    return "\n\n".join(part.strip("\n") for part in kept if part.strip()) + "\n"


def _node(text: str) -> str:
    """A node's text without its menu (which ends the node), references read
    as a reader reads them."""
    text = _READER_MARKER.sub("", _MENU.sub("", text))
    text = _NOTE.sub(lambda found: f"see {found.group(1)}", text)
    return _NOTE_OPEN.sub(lambda found: _SEE[found.group(1)] + found.group(2), text)
