"""roff escapes read as the characters a manual page shows (unit)."""

from __future__ import annotations

import pytest

from services.sources.roff_escapes import MAX_STRING_CHARS, RoffStrings, without_escapes

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("\\fBls\\fP [\\fI\\,OPTION\\/\\fP]...", "ls [OPTION]..."),  # help2man's fonts
        ("\\-\\-block\\-size=\\fI\\,SIZE\\/\\fP", "--block-size=SIZE"),
        ("a \\(em b \\[en] c", "a \u2014 b \u2013 c"),
        ("\\*(lqquoted\\*(rq \\*R", "\u201cquoted\u201d \u00ae"),
        ("\\[u00E9]t\\[char233]", "\u00e9t\u00e9"),
        ("\\f(CWcode\\fR \\f[CB]bold\\f[]", "code bold"),
        ("\\s-1SMALL\\s0 \\s[+2]big\\s[0]", "SMALL big"),
        ("\\e \\\\ \\& \\. \\~x", "\\ \\  .  x"),
        ("\\N'65'\\w'abc'\\h'3n'\\n(.g\\n[x]\\*[unknown]", "A"),
        ("joined\\c", "joined"),
        ("\\[u0000]\\[uD800]\\[uZZ]\\[u110000]", ""),  # no character there: nothing
        ("\\N'99999999'\\N'0'\\N'27'\\N'55296'\\N'233'", "\u00e9"),
    ],
)
def test_each_escape_shows_its_character_or_nothing(written: str, shown: str) -> None:
    assert without_escapes(written) == shown


def test_text_without_escapes_is_unchanged() -> None:
    text = "列出目录内容 (plain) text: 3 < 4 & [x]"
    assert without_escapes(text) == text


def test_a_number_escape_of_other_digits_shows_nothing() -> None:
    assert without_escapes("a\\N'\u00b9'b\\N'\u0663'c") == "abc"  # superscript, Arabic-Indic


def test_defined_strings_take_the_place_of_their_three_kinds_of_reference() -> None:
    strings = RoffStrings()
    strings.define("W top")
    strings.define("AM alternate\\-display mode")
    strings.define('Q "  quoted lead')
    strings.define("AM  (a) ", append=False)
    strings.define("AM more", append=True)
    line = "\\*W, \\*(AM and \\*[Q]; \\*(lq stays, \\\\*W is a backslash"
    assert strings.interpolated(line) == (
        "top, (a) more and   quoted lead; \\*(lq stays, \\\\*W is a backslash"
    )
    strings.remove("W Q")
    assert strings.interpolated("\\*W\\*[Q]") == "\\*W\\*[Q]"


def test_a_string_doubled_in_each_definition_cannot_fill_memory() -> None:
    strings = RoffStrings(budget=50_000)
    strings.define("a " + "x" * 50)
    for _ in range(40):  # each value twice the last, as a page could write it
        strings.define("a " + strings.interpolated("\\*a\\*a"))
        assert len(strings.values["a"]) <= MAX_STRING_CHARS
    line = "\\*a" * 10_000
    assert len(strings.interpolated(line)) <= len(line) + 50_000  # the page's budget, in all


def test_a_definition_keeps_its_value_after_a_tab_and_its_trailing_blanks() -> None:
    strings = RoffStrings()
    strings.define("X\tvalue ")
    assert strings.interpolated("<\\*X>") == "<value >"
