"""What the document encoder reads of a chunk: its text under the titles it sits in.

A chunk's heading path (`Guide > Components > Props`) gives its text a
topic: "declare them with an object" means nothing without "Props". A chunk
that does not open with a heading is embedded under its whole path. One that
opens with its own heading carries the last title already, and until
`struct-v4` it was embedded with nothing above it (546 of the 1,039 chunks
of the Vue.js guide, 769 of 3,031 on the third-party question set's pages),
so a section of a page titled "Conditional Rendering" that opened with
"## `v-show`" was embedded without the page's subject. It is now embedded under its parents' titles:

    Conditional Rendering

    ## `v-show`
    Another option for conditionally displaying an element ...

Measured on fresh indexes (bench/results/notes/heading_parents.md).
"""

from __future__ import annotations

from typing import Protocol

# How a heading path joins its titles (services.indexer.chunk_layout).
HEADING_PATH_SEPARATOR = " > "


class TitledText(Protocol):
    @property
    def heading_path(self) -> str: ...

    @property
    def text(self) -> str: ...


def parent_titles(heading_path: str, text: str) -> str:
    """The titles above a chunk that opens with its own heading (the path
    without its last title), else ""."""
    return heading_path.rpartition(HEADING_PATH_SEPARATOR)[0] if _opens_with_heading(text) else ""


def embedding_text(chunk: TitledText) -> str:
    """What the encoder sees (see the module docstring)."""
    path, text = chunk.heading_path, chunk.text
    above = parent_titles(path, text) if _opens_with_heading(text) else path
    return f"{above}\n\n{text}" if above else text


def _opens_with_heading(text: str) -> bool:
    return text.lstrip().startswith("#")
