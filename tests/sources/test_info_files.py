"""GNU Info manuals read as the text their reader shows (unit): the nodes'
text with their underlined titles; headers, menus, the directory entry and
the tag table gone; a split manual's parts each a page, its index skipped."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.models import ContentType, Document
from services.sources.info_files import info_as_text, is_info_name
from services.sources.loaders import LoadError, load_directory

pytestmark = pytest.mark.unit

# A manual as makeinfo writes one: the preamble, then nodes between U+001F.
MANUAL = """This is sed.info, produced by makeinfo version 6.8 from sed.texi.

This file documents GNU sed.
INFO-DIR-SECTION Text creation and manipulation
START-INFO-DIR-ENTRY
* sed: (sed).                   Stream EDitor.
END-INFO-DIR-ENTRY

\x1f
File: sed.info,  Node: Top,  Next: Overview,  Up: (dir)

GNU sed
*******

This file documents GNU sed.

* Menu:

* Overview::                   Invocation
* Examples::                   Some sample scripts

\x1f
File: sed.info,  Node: Overview,  Next: Examples,  Prev: Top,  Up: Top

2.1 Overview
============

\x00\x08[index\x00\x08]
Normally sed is invoked like this (*note Examples::):

     sed SCRIPT INPUTFILE...

*Note Reporting Bugs: (sed)Bugs, for more.

\x1f
Tag Table:
Node: Top\x7f200
Node: Overview\x7f400
\x1f
End Tag Table

\x1f
Local Variables:
coding: utf-8
End:
"""


def test_a_manual_reads_as_its_nodes_text() -> None:
    text = info_as_text(MANUAL)
    assert text.startswith("GNU sed\n*******\n\nThis file documents GNU sed.\n\n2.1 Overview\n")
    assert "Normally sed is invoked like this (see Examples):\n\n     sed SCRIPT" in text
    assert "See Reporting Bugs: (sed)Bugs, for more." in text
    hidden_parts = ("File: ", "Node: ", "* Menu:", "* Overview::", "INFO-DIR", "makeinfo")
    markers = ("Tag Table", "Local Variables", "\x1f", "\x7f", "\x00", "\x08", "[index]")
    for hidden in (*hidden_parts, *markers):
        assert hidden not in text, hidden


@pytest.mark.parametrize(
    ("name", "is_manual"),
    [
        ("sed.info", True),
        ("info/sed.info.gz", True),
        ("find.info-2.gz", True),
        ("dir", False),
        ("notes.information", False),
        (".info", False),
        ("sed.info.html", False),
    ],
)
def test_info_manuals_are_known_by_their_name(name: str, is_manual: bool) -> None:
    assert is_info_name(name) is is_manual


@pytest.mark.timeout(120)  # the hang guard
@pytest.mark.parametrize(
    "hostile", ["\x1f" * 200_000, "*Note " * 100_000, "\x1f\nFile: Node: \n* Menu:\n" * 50_000]
)
def test_hostile_text_is_read_in_linear_time(hostile: str) -> None:
    assert isinstance(info_as_text(hostile), str)


def test_a_folder_of_info_manuals_loads_each_part_as_a_text_page(tmp_path: Path) -> None:
    (tmp_path / "sed.info.gz").write_bytes(gzip.compress(MANUAL.encode()))
    index = "This is find.info.\n\x1f\nIndirect:\nfind.info-1: 1000\n\x1f\nTag Table:\n(Indirect)\n"
    (tmp_path / "find.info").write_text(index, encoding="utf-8")
    part = "\x1f\nFile: find.info,  Node: Top\n\nGNU Findutils\n*************\n\nFinding files.\n"
    (tmp_path / "find.info-1").write_text(part, encoding="utf-8")
    loaded = list(load_directory(tmp_path, scope_id="info"))
    docs = {d.doc_id: d for d in loaded if isinstance(d, Document)}
    assert set(docs) == {"sed.info.gz", "find.info-1"}
    assert (docs["sed.info.gz"].title, docs["sed.info.gz"].content_type) == (
        "GNU sed",
        ContentType.TEXT,
    )
    assert docs["find.info-1"].title == "GNU Findutils"
    skipped = [d for d in loaded if isinstance(d, LoadError)]
    assert [(d.source, d.skipped) for d in skipped] == [("find.info", True)]


def test_prose_after_a_menu_stays_and_references_read_once() -> None:
    node = (
        "\x1f\nFile: bc.info,  Node: Statements\n\n3 Statements\n************\n\n* Menu:\n\n"
        "* Pseudo Statements::     Extensions\n                          to POSIX\n\n"
        "Statements (as in most languages) are the units of execution.  Also see *note\n"
        "Common\noptions::, and *note Exit status::.\n"
    )
    text = info_as_text(node)
    assert "Pseudo Statements" not in text and "to POSIX" not in text
    assert "Statements (as in most languages) are the units of execution." in text
    assert "Also see Common options, and see Exit status." in text


def test_a_file_named_info_without_nodes_shows_nothing() -> None:
    """Qdrant's `version.info`, python-apt's `Debian.info`: the loader skips them."""
    assert info_as_text("Origin: Debian\nLabel: Debian\n") == ""


@pytest.mark.timeout(120)  # the hang guard: the node header's pattern backtracked
def test_a_header_without_an_end_is_read_in_linear_time() -> None:
    assert isinstance(info_as_text("\x1fFile: " + "Node: " * 200_000), str)


@given(
    st.lists(
        st.sampled_from(
            [
                "\x1f",
                "\n",
                "File: x.info,  Node: ",
                "Node: ",
                "* Menu:",
                "* A::",
                "* B: C.",
                "*note ",
                "*Note ",
                "see ",
                "::",
                ":",
                "Tag Table:",
                "Indirect:",
                "        d",
                "\x00\x08[index\x00\x08]",
                "\x00\x08",
                "Title\n*****",
                "word ",
            ]
        ),
        max_size=60,
    )
)
def test_any_arrangement_of_info_syntax_reads_to_nodes_text(pieces: list[str]) -> None:
    """Every awkward arrangement of an Info file's syntax (a separator at the
    end, a header without a line break, a menu with nothing after it, a
    reference without its `::`): no error, no separator or marker left."""
    text = info_as_text("".join(pieces))
    assert "\x1f" not in text and "\x00\x08" not in text
    assert "* Menu:" not in text.split("\n")  # a menu line; `* Menu:File` is no menu
