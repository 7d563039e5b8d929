"""Which converter reads a file's text, by its name (unit)."""

from __future__ import annotations

import pytest

from services.sources.info_files import INFO_INDEX_NOTE
from services.sources.manual_pages import MANUAL_ALIAS_NOTE
from services.sources.page_formats import empty_page_note, text_as_read

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("relpath", "text", "read"),
    [
        ("docs/a.mdx", "import X from 'x'\n\n# A\n", "\n# A\n"),
        ("man1/ls.1.gz", ".TH LS 1\n.SH NAME\nls \\- list\n", "# LS(1)\n\n## NAME\nls - list\n"),
        ("sed.info", "\x1f\nFile: sed.info,  Node: Top\n\nsed\n***\n", "sed\n***\n"),
        ("notes.txt", ".TH stays\n", ".TH stays\n"),
    ],
)
def test_each_format_is_read_by_its_converter(relpath: str, text: str, read: str) -> None:
    assert text_as_read(relpath, text) == read


def test_control_characters_of_a_manual_page_or_info_manual_go() -> None:
    # A form feed ends a line, as roff reads it.
    assert text_as_read("ls.1", ".TH LS 1\na\bb\x00c\td\x7f\x0ce\n") == "# LS(1)\nabc\td\ne\n"
    assert text_as_read("x.info", "\x1f\nFile: x,  Node: Top\n\nq\x01r\n") == "qr\n"
    assert text_as_read("a.txt", "a\bb\n") == "a\bb\n"  # as written: the Indexer rules


def test_a_file_named_like_a_page_or_manual_that_is_none_is_skipped() -> None:
    """Debian's rotated `changelog.1.gz` is named like a manual page, Qdrant's
    `version.info` like an Info manual: neither is read as one."""
    log = '2022-05-01  Sergey\n\t* configure.ac: \\ in AC_OUTPUT "\\n\\"\n'
    assert text_as_read("doc/tar/changelog.1.gz", log) == ""
    assert empty_page_note("doc/tar/changelog.1.gz", "") == MANUAL_ALIAS_NOTE
    assert text_as_read("segments/a/version.info", "1.16.0") == ""
    assert empty_page_note("segments/a/version.info", "") == INFO_INDEX_NOTE


def test_only_an_empty_converted_page_is_skipped_with_its_reason() -> None:
    assert empty_page_note("man3/sprintf.3", "\n") == MANUAL_ALIAS_NOTE
    assert empty_page_note("find.info.gz", "") == INFO_INDEX_NOTE
    assert empty_page_note("man3/printf.3", "# PRINTF(3)\n") is None
    assert empty_page_note("empty.md", "") is None  # the Indexer names its problem
